() => {
  // A token's p, q and acceptance probability sit in its title, a tooltip that needs a mouse to hover. A tap or
  // click on a token shows the same text in a small box beside it, for touch screens (and to keep it in view);
  // another click, Escape or a scroll closes it. The text is set as text, never as HTML. A scroll event that
  // arrives within a few frames of the tap is the end of a scroll that came before it (a touch screen's
  // momentum, a page scrolled to bring the token into view), and leaves the box open.
  // The keyboard: a reply's block of tokens is one Tab stop (render.render_tokens); in it the left and right arrow
  // keys (Home, End) move the focus from token to token, each showing its box and saying its text to a screen reader
  // through a live region; Escape goes back to the block.
  let box = null;
  let opened = 0;
  const live = document.createElement("div");
  live.className = "specui-sr-only";
  live.setAttribute("aria-live", "polite");
  document.body.appendChild(live);
  const close = () => { if (box) { box.remove(); box = null; } };
  const show = (token) => {
    close();
    box = document.createElement("div");
    box.className = "specui-tip";
    box.setAttribute("aria-hidden", "true");  // for the eyes: a screen reader hears the token's title and the live region
    box.textContent = token.getAttribute("title").split(" · ").join("\n");  // a line per figure
    document.body.appendChild(box);
    opened = performance.now();
    const at = token.getBoundingClientRect();
    const below = at.bottom + 6 + box.offsetHeight <= window.innerHeight;
    box.style.left = Math.max(4, Math.min(at.left, window.innerWidth - box.offsetWidth - 4)) + "px";
    box.style.top = (below ? at.bottom + 6 : Math.max(4, at.top - box.offsetHeight - 6)) + "px";
  };
  document.addEventListener("click", (event) => {
    const token = event.target.closest ? event.target.closest(".tok[title]") : null;
    close();
    if (!token || token.closest(".specui-legend")) return;
    show(token);
  });
  const STEPS = { ArrowRight: 1, ArrowLeft: -1, Home: "first", End: "last" };
  document.addEventListener("keydown", (event) => {
    const block = event.target.closest ? event.target.closest(".specui-text[tabindex]") : null;
    if (event.key === "Escape") {
      close();
      if (block && event.target !== block) block.focus();
      return;
    }
    const step = STEPS[event.key];
    if (!block || step === undefined || event.altKey || event.ctrlKey || event.metaKey) return;
    const tokens = [...block.querySelectorAll(".tok[title]")].filter((t) => t.getClientRects().length);  // shown ones
    if (!tokens.length) return;
    const at = tokens.indexOf(event.target);
    const to = step === "first" ? 0 : step === "last" ? tokens.length - 1
      : at < 0 ? (step > 0 ? 0 : tokens.length - 1) : Math.max(0, Math.min(tokens.length - 1, at + step));
    event.preventDefault();
    const token = tokens[to];
    token.tabIndex = -1;  // focusable by script, not a Tab stop of its own
    token.focus();
    show(token);
    live.textContent = `${JSON.stringify(token.textContent)}: ${token.getAttribute("title").split(" · ").join(", ")}`;
  });
  // the focus leaving the tokens (Tab on, a click elsewhere) closes the box a key opened
  document.addEventListener("focusin", (event) => { if (!event.target.closest || !event.target.closest(".tok")) close(); });
  window.addEventListener("scroll", () => { if (performance.now() - opened > 150) close(); }, true);
}
