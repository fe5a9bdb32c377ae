/* Upload progress on the Imports page: polls the batch's progress JSON and updates the panel
 * in place (parts done of total, rows, status) until the import has finished. No inline script:
 * the URL comes from the panel's data-progress-url. */
(function () {
  "use strict";
  var INTERVAL_MS = 1000;

  function count(n) { return Number(n).toLocaleString("en-US"); }

  function show(panel, p) {
    var bar = panel.querySelector("[data-testid=progress-bar]");
    bar.max = p.parts_total;
    bar.value = p.parts_done;
    panel.querySelector("[data-testid=progress-status]").textContent = p.status;
    panel.querySelector("[data-testid=progress-parts]").textContent =
      count(p.parts_done) + " of " + count(p.parts_total) + " part" + (p.parts_total === 1 ? "" : "s");
    panel.querySelector("[data-testid=progress-rows]").textContent =
      count(p.rows) + " row" + (p.rows === 1 ? "" : "s");
    var error = panel.querySelector("[data-testid=progress-error]");
    error.textContent = p.error || "";
    error.hidden = !p.error;
    panel.setAttribute("data-finished", p.finished ? "true" : "false");
  }

  function poll(panel) {
    var url = panel.getAttribute("data-progress-url");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (p) {
        show(panel, p);
        if (!p.finished) { window.setTimeout(function () { poll(panel); }, INTERVAL_MS); }
      })
      .catch(function () { window.setTimeout(function () { poll(panel); }, INTERVAL_MS * 5); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var panel = document.querySelector("[data-progress-url]");
    if (panel) { poll(panel); }
  });
})();
