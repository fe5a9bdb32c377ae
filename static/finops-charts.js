/* Charts drawn from the page's own data tables (the table is the chart's accessible twin).
 *
 * <canvas data-chart="TABLE_ID" data-chart-type="line|bar" [data-stacked] [data-cumulative]
 *         [data-dashed="Series A,Series B"] [data-points="Series C"]></canvas>
 * The table's first column gives the x labels; every other column (its <th> text) is a series,
 * except columns whose <th> has data-no-chart (a change, a percentage beside the amounts).
 * A cell's number is its data-value attribute, else its text without thousands separators and
 * currency codes. Lines are drawn without point markers, so a series named in data-points (an
 * anomaly's event: values on its days, blank elsewhere) gets visible markers: a one-day event
 * is a single point, which a line alone cannot show. No inline script, so the pages keep a strict Content-Security-Policy.
 */
(function () {
  "use strict";
  var PALETTE = ["#2f5bd3", "#d97706", "#127a3f", "#b42318", "#7c3aed", "#0e7490",
                 "#be185d", "#4d7c0f", "#92400e", "#475569"];

  function cellNumber(cell) {
    var raw = cell.getAttribute("data-value");
    if (raw === null) { raw = cell.textContent.replace(/[^0-9.\-]/g, ""); }
    if (raw === "" || raw === "-") { return null; }
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }

  function readTable(table, cumulative) {
    var ths = table.querySelectorAll("thead th");
    var headers = Array.prototype.map.call(ths, function (th) {
      return th.getAttribute("data-series") || th.textContent.trim();
    });
    var rows = table.querySelectorAll("tbody tr");
    var labels = [];
    var series = [];
    headers.forEach(function (name, i) {
      if (i > 0 && !ths[i].hasAttribute("data-no-chart")) {
        series.push({ label: name, column: i, data: [] });
      }
    });
    Array.prototype.forEach.call(rows, function (row) {
      var cells = row.querySelectorAll("th, td");
      if (cells.length < headers.length) { return; }
      labels.push(cells[0].textContent.trim());
      series.forEach(function (s) { s.data.push(cellNumber(cells[s.column])); });
    });
    if (cumulative) {
      series.forEach(function (s) {
        var total = 0;
        s.data = s.data.map(function (v) { if (v === null) { return null; } total += v; return total; });
      });
    }
    return { labels: labels, series: series };
  }

  function draw(canvas) {
    var table = document.getElementById(canvas.getAttribute("data-chart"));
    if (!table || typeof Chart === "undefined") { return; }
    var type = canvas.getAttribute("data-chart-type") || "line";
    var stacked = canvas.hasAttribute("data-stacked");
    var dashed = (canvas.getAttribute("data-dashed") || "").split(",");
    var pointed = (canvas.getAttribute("data-points") || "").split(",");
    var data = readTable(table, canvas.hasAttribute("data-cumulative"));
    // maintainAspectRatio is off, so the canvas takes its parent's height: a parent without
    // one (anything but a .chart box) makes Chart.js grow the page without end.
    if (!canvas.parentNode.classList.contains("chart")) {
      var box = document.createElement("div");
      box.className = "chart";
      canvas.parentNode.insertBefore(box, canvas);
      box.appendChild(canvas);
    }
    var datasets = data.series.map(function (s, i) {
      var colour = PALETTE[i % PALETTE.length];
      var marked = pointed.indexOf(s.label) >= 0;
      return {
        label: s.label, data: s.data, borderColor: colour, backgroundColor: colour,
        borderDash: dashed.indexOf(s.label) >= 0 ? [6, 4] : [],
        pointRadius: marked ? 6 : 0, pointHoverRadius: marked ? 8 : 4,
        // A marked series is separate events: never join its points across blank days.
        borderWidth: 2, fill: stacked && type === "line", spanGaps: !marked
      };
    });
    new Chart(canvas, {
      type: type,
      data: { labels: data.labels, datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: { x: { stacked: stacked }, y: { stacked: stacked, beginAtZero: true } },
        plugins: { legend: { position: "bottom" } }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("canvas[data-chart]"), draw);
  });
})();
