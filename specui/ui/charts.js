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
        plot.setAttribute("role", "figure");  // a named figure: its download (below) stays reachable
        plot.setAttribute("aria-label", said);
      }
    }
  };
  // A chart's plotly tool bar (zoom, pan, select, zoom in and out, autoscale, reset, its logo's link) was nine or ten
  // Tab stops, 38 on the Chat tab between the controls and the token trees. The bar stays for the mouse; the keyboard
  // keeps one stop a chart, its download as a PNG (the one tool that works without a pointer; plotly shows the bar as
  // it takes the focus), on the Teach tab as well: a presenter tabbing from the step buttons to the controls below
  // passes one stop a chart, and a keyboard can save the chart a mouse can (WCAG 2.1.1; the Teach tab's had none).
  // Plotly redraws the bar with the chart: done again on every change
  const kept = (button) => button.matches("[data-title^='Download plot']");
  const tabStops = () => {
    for (const button of document.querySelectorAll(".modebar-btn:not([tabindex='-1'])")) {
      if (!kept(button)) button.setAttribute("tabindex", "-1");
    }
  };
  let due = null;
  window.specuiWatch(() => {  // watch.js: the page changed
    if (due === null) due = setTimeout(() => { due = null; label(); tabStops(); }, 250);
  });
  label();
  tabStops();
}
