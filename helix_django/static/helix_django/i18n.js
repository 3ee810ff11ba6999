// Translations of the JS client: gettext(msgid) and interpolate(format, values) over a
// catalog of Django's `djangojs` domain (helix_django/locale/<lang>/LC_MESSAGES/djangojs.po,
// plus the host's LOCALE_PATHS).
//
// Where the catalog comes from, the first one found wins:
//   1. setCatalog(json): the JSON of Django's JSONCatalog view or of {% helix_js_catalog %};
//   2. the page's <script type="application/json" id="helix-js-catalog">, which the
//      template tag {% helix_js_catalog %} writes for the active language (chat.html does);
//   3. `globalThis.django.gettext`, when the page loads Django's JavaScriptCatalog script.
// With none of them the English msgid is the text: the kit works standalone (a bundled
// React app, Node). The catalog is read on the first lookup, not at import.
//
// Messages are named-placeholder strings, as Django's `interpolate(fmt, obj, true)`:
//   interpolate(gettext("Chat of %(date)s"), { date })

const ELEMENT_ID = "helix-js-catalog";

// null: not looked up yet; {}: looked up, nothing found.
let catalog = null;

/**
 * Use `json` as the catalog from now on (null: look it up again on the next call).
 * @param {{catalog?: Record<string, string | string[]>} | null} json
 */
export function setCatalog(json) {
  catalog = json ? json.catalog || {} : null;
}

function pageCatalog() {
  const node = typeof document === "undefined" ? null : document.getElementById(ELEMENT_ID);
  if (!node) return {};
  try {
    return JSON.parse(node.textContent).catalog || {};
  } catch {
    return {}; // a broken element must not break the page: English
  }
}

/** Return the translation of `msgid` in the page's language, or `msgid` itself. */
export function gettext(msgid) {
  if (catalog === null) catalog = pageCatalog();
  const value = catalog[msgid];
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text === "string" && text) return text;
  const django = globalThis.django;
  if (!Object.keys(catalog).length && typeof django?.gettext === "function") return django.gettext(msgid);
  return msgid;
}

/** Mark `msgid` for extraction without translating it (translate it where it is shown). */
export function gettext_noop(msgid) {
  return msgid;
}

/** Replace each `%(name)s` of `format` with `String(values[name])`; unknown names stay as they are. */
export function interpolate(format, values) {
  return format.replace(/%\((\w+)\)s/g, (whole, name) => (name in values ? String(values[name]) : whole));
}
