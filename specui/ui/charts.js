() => {
  // Plotly draws a chart as SVG that a screen reader meets as stray text. Each chart on the page is named here as
  // a figure, by its title, its axes' titles and its notes ("Chart: Acceptance per round. x: round, y: acceptance"),
  // whenever plotly draws or redraws it; the numbers behind it are in the stats line, the tables and the run's JSON.
  const text = (root, selector) => [...root.querySelectorAll(selector)].map((e) => e.textContent.trim()).filter(Boolean);
  const name = (plot) => {
    const title = text(plot, ".gtitle").join(" ");
    const axes = [...text(plot, ".xtitle").map((t) => `x: ${t}`), ...text(plot, ".ytitle").map((t) => `y: ${t}`)];
    const notes = text(plot, ".annotation-text").join(" ");  // e.g. an empty chart's "what it will show"
    return ["Chart" + (title ? `: ${title}` : ""), axes.join(", "), notes].filter(Boolean).join(". ");
  };
  const label = () => {
    for (const plot of document.querySelectorAll(".js-plotly-plot")) {
      const said = name(plot);
      if (plot.getAttribute("aria-label") !== said) {
        plot.setAttribute("role", "figure");  // a named figure: its modebar stays reachable
        plot.setAttribute("aria-label", said);
      }
    }
  };
  let due = null;
  new MutationObserver(() => {
    if (due === null) due = setTimeout(() => { due = null; label(); }, 250);
  }).observe(document.body, { childList: true, subtree: true });
  label();
}
