() => {
  // A token's p, q and acceptance probability sit in its title, a tooltip that needs a mouse to hover. A tap or
  // click on a token shows the same text in a small box beside it, for touch screens (and to keep it in view);
  // another click, Escape or a scroll closes it. The text is set as text, never as HTML. A scroll event that
  // arrives within a few frames of the tap is the end of a scroll that came before it (a touch screen's
  // momentum, a page scrolled to bring the token into view), and leaves the box open.
  let box = null;
  let opened = 0;
  const close = () => { if (box) { box.remove(); box = null; } };
  document.addEventListener("click", (event) => {
    const token = event.target.closest ? event.target.closest(".tok[title]") : null;
    close();
    if (!token || token.closest(".specui-legend")) return;
    box = document.createElement("div");
    box.className = "specui-tip";
    box.setAttribute("role", "tooltip");
    box.textContent = token.getAttribute("title").split(" · ").join("\n");  // a line per figure
    document.body.appendChild(box);
    opened = performance.now();
    const at = token.getBoundingClientRect();
    const below = at.bottom + 6 + box.offsetHeight <= window.innerHeight;
    box.style.left = Math.max(4, Math.min(at.left, window.innerWidth - box.offsetWidth - 4)) + "px";
    box.style.top = (below ? at.bottom + 6 : Math.max(4, at.top - box.offsetHeight - 6)) + "px";
  });
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  window.addEventListener("scroll", () => { if (performance.now() - opened > 150) close(); }, true);
}
