// The Copy button of an answer: copies its raw Markdown text and says "Copied" for a moment.
//
// navigator.clipboard.writeText where the page may use it (a secure context: HTTPS or
// localhost); elsewhere, or when it is refused, a selected off-screen textarea and
// document.execCommand("copy"), which browsers still honour inside a click.

import { el } from "./dom.js";
import { gettext } from "./i18n.js";

const CONFIRM_MS = 2000;

function copyWithTextarea(text) {
  const area = el("textarea", { readonly: true, "aria-hidden": "true", class: "hx-copy-buffer", tabindex: "-1" });
  area.value = text;
  document.body.append(area);
  const focused = document.activeElement;
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  area.remove();
  if (focused instanceof HTMLElement) focused.focus();
  return copied;
}

/** Copy `text` to the clipboard; resolve to true when it was copied. */
export async function copyText(text) {
  if (window.isSecureContext && navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, the document lost focus): the textarea way may still work.
    }
  }
  return copyWithTextarea(text);
}

/** Return a Copy button that copies `text()` (read at click time) and confirms it in place. */
export function copyButton(text) {
  const label = gettext("Copy");
  const button = el("button", { type: "button", class: "hx-chip hx-copy", "data-action": "copy", title: gettext("Copy this answer as Markdown") }, label);
  const status = el("span", { class: "hx-copy-status", role: "status", "aria-live": "polite" });
  let timer = 0;
  button.addEventListener("click", async () => {
    const copied = await copyText(text());
    button.textContent = copied ? gettext("Copied") : gettext("Copy failed");
    button.dataset.copied = copied ? "yes" : "no";
    status.textContent = button.textContent;
    clearTimeout(timer);
    timer = setTimeout(() => {
      button.textContent = label;
      delete button.dataset.copied;
      status.textContent = "";
    }, CONFIRM_MS);
  });
  return [button, status];
}
