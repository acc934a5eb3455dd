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
  // A chart's plotly tool bar (download, zoom, pan, zoom in and out, autoscale, reset, its logo's link) was nine or
  // ten Tab stops, 38 on the Chat tab between the controls and the token trees. As WAI-ARIA's toolbar pattern has it
  // (plotly gives the bar the role, not the keys), a bar is one Tab stop (its download as a PNG at first, on the Teach
  // tab as well: a keyboard can save the chart a mouse can, WCAG 2.1.1) and its arrow keys move between its buttons
  // (Home, End: its first and last), the button moved to becoming the bar's stop; plotly shows the bar while it holds
  // the focus. Zoom in and out, autoscale and reset work from the keys; zoom, pan and select then want a pointer.
  // Plotly redraws the bar with the chart: done again on every change, the stop kept by its title for the chart's
  // place on the page (its block's id, which a redraw keeps)
  const DOWNLOAD = "Download plot";
  const stops = new Map();  // a chart's block id -> the title of its bar's stop
  const place = (element) => {
    const block = element.closest(".js-plotly-plot")?.parentElement?.closest("[id]");
    return block ? block.id : "";
  };
  const tabStops = () => {
    for (const bar of document.querySelectorAll(".modebar")) {
      const buttons = [...bar.querySelectorAll(".modebar-btn")];
      const kept = stops.get(place(bar)) || DOWNLOAD;
      const stop = buttons.find((b) => b.dataset.title === kept) ||
        buttons.find((b) => (b.dataset.title || "").startsWith(DOWNLOAD));
      for (const button of buttons) {
        if (button === stop) button.removeAttribute("tabindex");
        else if (button.getAttribute("tabindex") !== "-1") button.setAttribute("tabindex", "-1");
      }
      if (!bar.hasAttribute("aria-label")) bar.setAttribute("aria-label", "Chart tools");  // plotly's role: toolbar
    }
  };
  const STEPS = { ArrowRight: 1, ArrowLeft: -1, Home: "first", End: "last" };
  document.addEventListener("keydown", (event) => {
    const from = event.target.closest ? event.target.closest(".modebar-btn") : null;
    const step = STEPS[event.key];
    if (!from || step === undefined || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const buttons = [...from.closest(".modebar").querySelectorAll(".modebar-btn")];
    const at = buttons.indexOf(from), last = buttons.length - 1;
    const to = buttons[step === "first" ? 0 : step === "last" ? last : (at + step + last + 1) % (last + 1)];
    event.preventDefault();
    for (const button of buttons) button.setAttribute("tabindex", "-1");
    to.removeAttribute("tabindex");
    if (place(from)) stops.set(place(from), to.dataset.title || "");
    to.focus();
  });
  // A redraw took the focused button off the page and the focus fell to the page, where → stepped the Teach tab's
  // rounds (its auto-play redraws the charts each round): the focus goes back to the same button of the bar drawn
  // in its place. The button the focus is on, unless the focus left it for the page or another element
  let held = null;
  document.addEventListener("focusin", (event) => {
    const button = event.target.closest ? event.target.closest(".modebar-btn") : null;
    held = button && place(button) ? { button, at: place(button), title: button.dataset.title } : null;
  });
  document.addEventListener("focusout", (event) => {
    const left = held && held.button === event.target ? held : null;
    setTimeout(() => { if (left && held === left && left.button.isConnected) held = null; }, 0);  // not a redraw
  });
  // a key or a pointer pressed while the focus is on the page (its chart removed, its bar not drawn again yet): the
  // visitor goes on from there, and a bar drawn later at that place does not take the focus back from under them
  for (const kind of ["keydown", "pointerdown"]) {
    document.addEventListener(kind, () => { if (held && !held.button.isConnected) held = null; }, true);
  }
  const refocus = () => {
    if (!held || held.button.isConnected) return;
    if (document.activeElement && document.activeElement !== document.body) { held = null; return; }
    const chart = document.getElementById(held.at);
    const button = chart && [...chart.querySelectorAll(".modebar-btn")].find((b) => b.dataset.title === held.title);
    if (!button) return;  // its bar not drawn yet: at a later change
    for (const other of button.closest(".modebar").querySelectorAll(".modebar-btn")) {
      other.setAttribute("tabindex", "-1");
    }
    button.removeAttribute("tabindex");  // the bar's stop, as the arrows left it
    button.focus({ preventScroll: true });
  };
  let due = null;
  window.specuiWatch(() => {  // watch.js: the page changed
    refocus();
    if (due === null) due = setTimeout(() => { due = null; label(); tabStops(); }, 250);
  });
  label();
  tabStops();
}
