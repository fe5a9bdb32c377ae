/* Upload progress on the Imports page: polls the batch's progress JSON and updates the panel
 * in place (parts done of total, rows, status) until the import has finished, and the batch's
 * row in the table below with it (status, rows). When the import has finished, the table's body
 * is fetched again from the page itself, so every row (the error as the server shows it, an
 * earlier batch this one superseded) matches what a reload would show. No inline script: the
 * URL comes from the panel's data-progress-url. */
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
    showRow(p);
  }

  function showRow(p) {
    var row = document.querySelector("tr[data-batch-id=\"" + p.batch_id + "\"]");
    if (!row) { return; }
    var status = row.querySelector("[data-cell=status] .status");
    if (status) {
      status.textContent = p.status;
      status.className = "status status-" + p.status;
    }
    var rows = row.querySelector("[data-cell=rows]");
    if (rows) { rows.textContent = count(p.rows); }
    var periods = row.querySelector("[data-cell=periods]");
    if (periods && p.billing_periods && p.billing_periods.length) {
      periods.textContent = p.billing_periods.join(", ");
    }
  }

  // The batches table as the server draws it now (this page's own URL, its tbody only).
  function refreshTable() {
    var table = document.querySelector("table[data-testid=import-batches]");
    if (!table || typeof DOMParser === "undefined") { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("table[data-testid=import-batches] tbody");
        var current = table.querySelector("tbody");
        if (fresh && current) {
          current.replaceWith(document.importNode(fresh, true));
          table.setAttribute("data-refreshed", "true");
        }
      })
      .catch(function () { /* the row updated from the progress stays */ });
  }

  function poll(panel) {
    var url = panel.getAttribute("data-progress-url");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.json(); })
      .then(function (p) {
        show(panel, p);
        if (p.finished) { refreshTable(); } else {
          window.setTimeout(function () { poll(panel); }, INTERVAL_MS);
        }
      })
      .catch(function () { window.setTimeout(function () { poll(panel); }, INTERVAL_MS * 5); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var panel = document.querySelector("[data-progress-url]");
    if (panel) { poll(panel); }
  });
})();
