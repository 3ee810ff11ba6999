// The run change page of a live generation refreshes its live parts (at a glance, partial
// output, recovery) every 2 s, in place, until the generation ends; then once more, and stops.
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  function refresh() {
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("helix-live");
        var current = document.getElementById("helix-live");
        if (!fresh || !current) { return; }
        current.replaceWith(fresh);
        if (fresh.dataset.live === "1") { window.setTimeout(refresh, INTERVAL_MS); }
        else { document.documentElement.dataset.helixEnded = "1"; }
      })
      .catch(function () { window.setTimeout(refresh, INTERVAL_MS * 2); });
  }
  window.setTimeout(refresh, INTERVAL_MS);
})();
