// Unit tests of the JS client's translations (helix_django/static/helix_django/i18n.js)
// under Node's test runner: no page, no document. Run by tests/browser/test_aisdk_kit_unit.py.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import { networkError } from "../../../helix_django/static/helix_django/errors.js";
import { gettext, interpolate, setCatalog } from "../../../helix_django/static/helix_django/i18n.js";

afterEach(() => {
  setCatalog(null);
  delete globalThis.django;
});

test("without a catalog (no page: a bundled app, Node) the text is the English msgid", () => {
  assert.equal(gettext("Retry"), "Retry");
  assert.equal(networkError().body.error, "The server could not be reached");
  assert.equal(networkError().code, "network_error");
});

test("a catalog set as JSONCatalog's JSON translates, and the client's own error texts with it", () => {
  setCatalog({ catalog: { Retry: "Erneut versuchen", "The server could not be reached": "Der Server war nicht erreichbar" }, plural: "(n != 1)" });
  assert.equal(gettext("Retry"), "Erneut versuchen");
  assert.equal(networkError().body.error, "Der Server war nicht erreichbar");
  assert.equal(networkError().code, "network_error"); // codes stay English identifiers
  assert.equal(gettext("Not in the catalog"), "Not in the catalog");
});

test("an empty translation or a plural entry falls back sensibly", () => {
  setCatalog({ catalog: { Keep: "", "%(n)s run": ["%(n)s Lauf", "%(n)s Läufe"] } });
  assert.equal(gettext("Keep"), "Keep");
  assert.equal(gettext("%(n)s run"), "%(n)s Lauf");
});

test("Django's JavaScriptCatalog script (window.django.gettext) is used when no catalog is given", () => {
  globalThis.django = { gettext: (msgid) => (msgid === "Send" ? "Senden" : msgid) };
  setCatalog(null);
  assert.equal(gettext("Send"), "Senden");
});

test("interpolate fills named placeholders and leaves unknown ones", () => {
  assert.equal(interpolate("Reconnecting… (attempt %(attempt)s of %(max)s)", { attempt: 2, max: 5 }), "Reconnecting… (attempt 2 of 5)");
  assert.equal(interpolate("%(label)s · %(missing)s", { label: "Stopped" }), "Stopped · %(missing)s");
});
