// Appended to a copy of report.html by test_report_layout.py: once every figure block is drawn, writes
// the layout findings at the window width into <html data-checks>, for --dump-dom to carry out.
(function measure(tries) {
  const blocks = document.querySelectorAll("script.figure-data").length;
  const plots = document.querySelectorAll(".js-plotly-plot");
  if (plots.length < blocks && tries > 0) { setTimeout(() => measure(tries - 1), 100); return; }
  const width = document.documentElement.clientWidth;
  const out = { width, plots: plots.length, blocks, overflow: [], legends: [] };
  for (const table of document.querySelectorAll("table")) {
    const box = table.getBoundingClientRect();
    if (box.right > width || table.parentElement.scrollWidth > table.parentElement.clientWidth) out.overflow.push(table.rows.length);
  }
  for (const plot of plots) {
    const legend = plot.querySelector("g.legend");
    if (!legend) continue;
    const outer = plot.getBoundingClientRect(), box = legend.getBoundingClientRect();
    const bar = legend.querySelector(".scrollbar");
    out.legends.push({ id: plot.id, scroll: bar ? bar.getBoundingClientRect().height : 0,
      inside: box.left >= outer.left - 1 && box.right <= outer.right + 1 && box.top >= outer.top - 1 && box.bottom <= outer.bottom + 1 });
  }
  document.documentElement.setAttribute("data-checks", JSON.stringify(out));
})(100);
