// Markdown of an assistant's answer to sanitised HTML: marked (CommonMark + GFM) parses,
// DOMPurify removes everything that could run (script, iframe, on* attributes, javascript:
// URLs, forms) from the HTML marked writes, raw HTML of the answer included.
//
//   renderMarkdown("**Hi** [docs](https://example.com)")
//   // '<p><strong>Hi</strong> <a href="https://example.com" target="_blank" rel="noopener noreferrer">docs</a></p>\n'
//
// Links open in a new tab without access to this page (rel="noopener noreferrer").
// The libraries are vendored in ./vendor/ (VENDOR.md: versions, licences, how to update).

import { Marked } from "./vendor/marked.esm.js";
import createDOMPurify from "./vendor/purify.es.js";

const marked = new Marked({ gfm: true, breaks: false, async: false });

// Tags an answer never needs, on top of what DOMPurify always removes (script, iframe, ...).
const FORBID_TAGS = ["style", "form", "input", "button", "textarea", "select", "option", "dialog", "template"];
const FORBID_ATTR = ["style", "id", "name", "autofocus"];

let purifier = null;

function purify() {
  if (purifier) return purifier;
  // An instance of its own: hooks set here never touch a DOMPurify the host page uses.
  purifier = createDOMPurify(window);
  purifier.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  return purifier;
}

/**
 * Return `text` (Markdown) as sanitised HTML, safe to assign to `innerHTML`.
 * @param {string} text
 * @returns {string}
 */
export function renderMarkdown(text) {
  const html = marked.parse(text || "");
  return purify().sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS,
    FORBID_ATTR,
  });
}
