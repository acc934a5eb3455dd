() => {
  // A token's p, q and acceptance probability come short, in its value (render.tip_value: the figures alone, where
  // its title would be sent again whole with every frame of a streamed reply); `tip` writes the tooltip out, as
  // render.tooltip does, and puts it in the token's title as the mouse or the focus comes to it (a native tooltip,
  // a screen reader's description). A title a token came with (the Teach tab's, the arena's) is its tooltip. A tap or
  // click on a token shows the same text in a small box beside it, for touch screens (and to keep it in view);
  // another click, Escape or a scroll closes it. The text is set as text, never as HTML. A scroll event that
  // arrives within a few frames of the tap is the end of a scroll that came before it (a touch screen's
  // momentum, a page scrolled to bring the token into view), and leaves the box open.
  // The keyboard: a reply's block of tokens is one Tab stop (render.render_tokens); in it the left and right arrow
  // keys (Home, End) move the focus from token to token, each showing its box and saying its text to a screen reader
  // through a live region; Escape goes back to the block.
  const KINDS = {
    accepted: "accepted draft token", resampled: "resampled by the target (first rejection)",
    bonus: "bonus token (every draft accepted)", plain: "plain decoding (target alone)", rejected: "rejected draft token",
  };  // render.KIND_LABELS
  const NOTES = {  // render.NOTE_CODES
    c: "copied from the context", u: "nothing was drafted this round: the target's own token", r: "rejected here",
    d: "discarded after the rejection", n: "discarded after the rejection (p never needed)",
  };
  const SPECIAL = "a special token (the end of the model's turn, or another control token), not text";  // SPECIAL_NOTE
  const PART = "part of a character (some of its UTF-8 bytes, no text alone): the token that completes the character " +
    "shows it whole; the reply's text and its copy hold the character once (at the end of a reply the token limit " +
    "cut inside a character, none came: that character is left out)";  // render.PART_NOTE
  const ESCAPES = { "\\": "\\\\", "\n": "\\n", "\t": "\\t" };
  const repr = (text) => {  // Python's repr of a printable-ASCII text (render.tip_value sends any other's)
    const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
    return quote + [...text].map((ch) => ch === quote ? "\\" + ch : ESCAPES[ch] || ch).join("") + quote;
  };
  const tip = (token) => {
    const fields = (token.getAttribute("value") || "").split(" ");
    if (token.hasAttribute("title") || fields.length < 5) return token.getAttribute("title") || "";
    const [p, q, accept, id, notes] = fields;
    const kind = [...token.classList].map((c) => c.slice(4)).find((k) => k in KINDS);
    const parts = [KINDS[kind], `p (target) = ${p}`, `q (draft) = ${q}`,
      `accept prob ${kind === "resampled" ? "of the rejected draft" : "min(1, p/q)"} = ${accept}`];
    if (id) parts.push(`token ${id} ${fields.length > 5 ? fields.slice(5).join(" ") : repr(token.textContent)}`);
    parts.push(...[...notes].map((n) => NOTES[n]));
    if (token.classList.contains("tok-special")) parts.push(SPECIAL);
    else if (token.classList.contains("tok-part")) parts.push(PART);  // render.part_class (a NUL shows no text)
    return parts.join(" · ");
  };
  const titled = (token) => { if (!token.hasAttribute("title")) token.setAttribute("title", tip(token)); return token; };
  const TOKEN = ".tok[title], .tok[value]";
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
    box.textContent = tip(token).split(" · ").join("\n");  // a line per figure
    document.body.appendChild(box);
    opened = performance.now();
    const at = token.getBoundingClientRect();
    const below = at.bottom + 6 + box.offsetHeight <= window.innerHeight;
    box.style.left = Math.max(4, Math.min(at.left, window.innerWidth - box.offsetWidth - 4)) + "px";
    box.style.top = (below ? at.bottom + 6 : Math.max(4, at.top - box.offsetHeight - 6)) + "px";
  };
  document.addEventListener("click", (event) => {
    const token = event.target.closest ? event.target.closest(TOKEN) : null;
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
    const tokens = [...block.querySelectorAll(TOKEN)].filter((t) => t.getClientRects().length);  // shown ones
    if (!tokens.length) return;
    const at = tokens.indexOf(event.target);
    const to = step === "first" ? 0 : step === "last" ? tokens.length - 1
      : at < 0 ? (step > 0 ? 0 : tokens.length - 1) : Math.max(0, Math.min(tokens.length - 1, at + step));
    event.preventDefault();
    const token = titled(tokens[to]);
    token.tabIndex = -1;  // focusable by script, not a Tab stop of its own
    token.focus();
    show(token);
    live.textContent = `${JSON.stringify(token.textContent)}: ${tip(token).split(" · ").join(", ")}`;
  });
  // a token's title written out as the mouse comes to it (before its native tooltip shows) or the focus does
  const over = (event) => { const token = event.target.closest && event.target.closest(TOKEN); if (token) titled(token); };
  document.addEventListener("mouseover", over);
  document.addEventListener("focusin", over);
  // the focus leaving the tokens (Tab on, a click elsewhere) closes the box a key opened
  document.addEventListener("focusin", (event) => { if (!event.target.closest || !event.target.closest(".tok")) close(); });
  window.addEventListener("scroll", () => { if (performance.now() - opened > 150) close(); }, true);
}
