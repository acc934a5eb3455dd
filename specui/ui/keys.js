() => {
  // The Teach tab steps with the keyboard, and so with a presenter's clicker (it sends PageDown / PageUp or the
  // arrow keys): → or PageDown is "Next", ← or PageUp "Previous" of whichever step-through is on screen (a tree
  // round's, when its panel is open there, else the rounds'). The second drafter's view (#compare-view) shows the
  // round the rounds' step-through is on and has no buttons of its own: on screen with a comparison, it steps the
  // rounds (a projector shows it with the step view scrolled above). With the rounds below the screen (the controls
  // above them fill a projector's screen: Decode or Play just clicked), the keys step the rounds once some are
  // decoded, or once the status line asks for Next (a page refreshed at round 1: the lesson is back, Next decodes it),
  // and scroll them into view; elsewhere (the experiments further down) they scroll as always. They never act while a
  // text box, a slider or a menu has the focus, nor the arrows on a radio (a drafter just clicked: PageDown and PageUp
  // step there) or in a chart's tool bar (charts.js: they move between its buttons).
  const steppers = [["#tree-step-view", "#tree-step-next", "#tree-step-prev"], ["#step-view", "#step-next", "#step-prev"]];
  const followers = [["#compare-view .teach-compare[data-round]", steppers[1]]];  // [a view, the stepper it follows]
  const forward = { ArrowRight: true, PageDown: true, ArrowLeft: false, PageUp: false };
  const onScreen = (element) => {
    if (!element || element.offsetParent === null) return false;  // another tab, or a closed panel
    const box = element.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  };
  // the status line names the Next button in bold ("**Next round ▶** … decodes it at round 1"): a refreshed page's
  // lesson is back with no round decoded yet, and a clicker's first PageDown scrolled the page past it
  const asksForNext = () => {
    const next = document.querySelector(steppers[1][1]), status = document.querySelector("#step-status");
    const label = next && next.textContent.trim();
    return !!label && !!status && [...status.querySelectorAll("strong")].some((s) => s.textContent.trim() === label);
  };
  let pointedAt = -Infinity, pointed = null;  // the element the pointer last focused (a click, a tap)
  document.addEventListener("pointerdown", () => { pointedAt = performance.now(); }, true);
  document.addEventListener("focusin", (event) => {
    pointed = performance.now() - pointedAt < 500 ? event.target : null;
  });
  document.addEventListener("keydown", (event) => {
    if (!(event.key in forward) || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const focus = document.activeElement;
    // a radio or a checkbox (a Drafter just clicked) keeps its arrows, as browsers have them; a clicker's PageDown
    // and PageUp still step. A text box, a slider or a menu keeps every key
    const picked = focus && focus.tagName === "INPUT" && ["radio", "checkbox"].includes(focus.type);
    if (picked && event.key.startsWith("Arrow")) return;
    if (focus && !picked && (focus.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(focus.tagName))) return;
    // a chart's tool bar takes its arrows (charts.js); PageDown and PageUp, a clicker's keys, still step
    if (focus && focus.closest && focus.closest("[role=toolbar]") && event.key.startsWith("Arrow")) return;
    // the arrows scroll a table reached with Tab (below); one a click or a tap focused (a presenter pointing at it)
    // leaves them stepping
    if (focus && focus.hasAttribute("data-specui-scroll") && focus !== pointed) return;
    let shown = steppers.find(([view]) => onScreen(document.querySelector(view)));
    if (!shown) shown = (followers.find(([view]) => onScreen(document.querySelector(view))) || [])[1];
    const rounds = document.querySelector(steppers[1][0]);
    const below = rounds && rounds.offsetParent !== null && rounds.getBoundingClientRect().top >= window.innerHeight;
    const waiting = rounds && (rounds.querySelector(".teach-step[data-round]") || forward[event.key] && asksForNext());
    if (!shown && below && waiting) {
      shown = steppers[1];  // the Teach tab is shown, with rounds decoded below the controls: bring them into view
      rounds.scrollIntoView({ block: "start" });
    }
    if (!shown) return;
    const button = document.querySelector(forward[event.key] ? shown[1] : shown[2]);
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();  // counted as a press by the listener below, as a mouse click is
  });
  // Every click of a step-through's Next or Previous is a press, kept in order until the server takes it: gradio
  // runs one event of the buttons at a time, so presses faster than it answers (a double-tapped clicker, a held
  // key) wait here, and the event after takes them all at once (teach_keys.py: window.specuiTakePresses). An
  // auto-play tick is a press too (window.specuiTick clicks the hidden #NAME-tick): one stepping event in flight,
  // so its answers reach the page in the order the server moved the step
  const presses = {};
  const kinds = { next: "+", prev: "-", tick: "t", redraw: "=" };
  document.addEventListener("click", (event) => {
    const selector = "button[id$='-next'], button[id$='-prev'], button[id$='-tick'], button[id$='-redraw']";
    const button = event.target.closest ? event.target.closest(selector) : null;
    const name = button && button.id.replace(/-(next|prev|tick|redraw)$/, "");
    if (!steppers.some(([view]) => view === `#${name}-view`)) return;
    (presses[name] = presses[name] || []).push(kinds[button.id.slice(name.length + 1)]);
  }, true);
  window.specuiTakePresses = (name) => (presses[name] || []).splice(0).join("");
  // An event that changed the step shown another way (Decode, a second drafter) has it drawn again as a press "="
  // (teach_keys.redraw_after): its answer and a press's could land in either order, the stepping event's in order
  window.specuiRedraw = (name) => { document.querySelector(`#${name}-redraw`)?.click(); };
  // Pause takes effect as it is clicked: the timer stops only when the server's answer to it arrives, and a tick
  // in between (or one still waiting here) stepped a round after the class saw the auto-play paused
  const paused = {};
  document.addEventListener("click", (event) => {
    const button = event.target.closest ? event.target.closest("button[id$='-play']") : null;
    if (!button) return;
    const name = button.id.replace(/-play$/, "");
    paused[name] = button.innerText.includes("Pause");  // the label as clicked: Pause, or Play again
    if (paused[name] && presses[name]) presses[name] = presses[name].filter((press) => press !== "t");
  }, true);
  // At most one tick waits here: on a slow server the ticks of the step in flight piled up, and the next event
  // applied them all (the auto-play jumped from round 7 to 12); a tick waiting already is the next step
  window.specuiTick = (name) => {
    const button = document.querySelector(`#${name}-tick`);
    if (button && !paused[name] && !(presses[name] || []).includes("t")) button.click();
  };
  // What style.css lets scroll (the Teach tab's draft table on a phone, a long context, a side of the compare view)
  // is a Tab stop while it overflows, so that the keyboard scrolls it too: its arrows then scroll, not step (axe's
  // scrollable-region-focusable: a draft table a phone's page cut off was out of a keyboard's reach)
  const scrollers = "#teach-tab .teach-table, #teach-tab .teach-context, #teach-tab .teach-side";
  const ESCAPE = " (Escape in the number box or on the slider)";
  const RESET_TIP = "Reset to default value" + ESCAPE, PRESET_TIP = "Reset to the preset's value" + ESCAPE;
  let due = null;
  const tidy = () => {
    due = null;
    toEnds();  // a box shown since (a tab, a panel opened): the page unchanged
    for (const reset of document.querySelectorAll(".block .reset-button")) {
      const block = reset.closest(".block");
      const tip = presetValues(block) ? PRESET_TIP : RESET_TIP;
      if (!block.querySelector("input[type=range]") || reset.getAttribute("title") === tip) continue;
      reset.setAttribute("tabindex", "-1");  // a slider's ↺ (below)
      reset.setAttribute("title", tip);
      reset.setAttribute("aria-label", tip.slice(0, tip.indexOf(" (")));  // gradio's said "Reset to default value"
      for (const box of block.querySelectorAll("input[type=range], input[type=number]")) {
        box.setAttribute("aria-keyshortcuts", "Escape");
      }
    }
    for (const box of document.querySelectorAll(scrollers)) {
      if (!box.getClientRects().length) continue;  // hidden (another tab, a closed panel): it scrolls as it did
      const scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (scrolls && !box.hasAttribute("data-specui-scroll")) {
        box.setAttribute("data-specui-scroll", "");
        box.setAttribute("tabindex", "0");
      } else if (!scrolls && box.hasAttribute("data-specui-scroll")) {
        box.removeAttribute("data-specui-scroll");
        box.removeAttribute("tabindex");
      }
    }
  };
  // The context the drafts continue from (.teach-context, its height capped by style.css) opens at its end, where
  // the drafts go on: at its top, a chat preset's system prompt filled the box from round 2 on, the text the drafts
  // continue below its foot. A text the reader scrolled keeps its place until the box's text changes
  const ended = new WeakMap();  // a context box -> the text it was last scrolled to the end for
  const toEnds = () => {
    for (const box of document.querySelectorAll("#teach-tab .teach-context")) {
      if (ended.get(box) === box.textContent || !box.getClientRects().length) continue;  // hidden: once it shows
      ended.set(box, box.textContent);
      box.scrollTop = box.scrollHeight;
    }
  };
  // A page refreshed mid-lesson decodes the run again at the round the class had reached (teach_memory: the status
  // line says "Back at round N"), below the controls: off a projector's 720 lines. The first round shown before any
  // press of a key or a pointer on the page brings the status line, and the round under it, into view. A wheel turned
  // (the reader scrolled the page already) or a click that came with no press (a screen reader's, voice control's or
  // a switch's activation: a fresh visitor's first Decode) is a visitor's too, and the page is left where it is
  let restoring = true;
  const visited = (event) => { if (event.isTrusted) restoring = false; };
  for (const kind of ["keydown", "pointerdown", "wheel", "click"]) {
    document.addEventListener(kind, visited, { capture: true, passive: true });
  }
  const restored = () => {
    const status = document.querySelector("#step-status");
    if (!restoring || !status || status.offsetParent === null) return;  // not shown: another tab
    if (!document.querySelector(`${steppers[1][0]} .teach-step[data-round]`)) return;
    restoring = false;
    status.scrollIntoView({ block: "start" });
  };
  // A gr.Radio is one radio group, as a keyboard expects: one Tab stop (its chosen option), the arrow keys moving the
  // choice between its options. Gradio 6 names each option's input apart ("radio-1", "radio-2"... and a new name each
  // time it draws one again, a choice made), so each option was a group of its own: seven Tab stops for the Chat tab's
  // Drafter, and no arrows. The options of one fieldset share a name here, given again whenever gradio renames one.
  // The fieldset is a radiogroup named by its label (gradio's is a span, no legend), so a screen reader says "Drafter"
  const groups = new WeakMap();  // a radio's fieldset -> the name its options share
  const grouped = () => {
    for (const radio of document.querySelectorAll("fieldset input[type=radio]")) {
      const set = radio.closest("fieldset");
      if (!groups.has(set)) groups.set(set, `specui-radios-${set.id || Math.random().toString(36).slice(2)}`);
      const label = set.querySelector("[data-testid=block-info]");
      if (set.getAttribute("role") !== "radiogroup") set.setAttribute("role", "radiogroup");
      if (label && set.getAttribute("aria-label") !== label.textContent.trim()) {
        set.setAttribute("aria-label", label.textContent.trim());
      }
      if (radio.name !== groups.get(set)) radio.name = groups.get(set);
    }
  };
  grouped();
  window.specuiWatch(grouped, "name");  // gradio renamed an option
  const soon = () => { if (due === null) due = setTimeout(tidy, 100); };
  window.specuiWatch(() => { grouped(); toEnds(); restored(); soon(); });  // watch.js: the page changed
  window.addEventListener("resize", soon);
  document.addEventListener("click", soon, true);  // a tab or a panel opened shows its tables, the page unchanged
  // A slider that a preset sets (K, the confidence stop: preset_view.tell_resets) goes back to the value the preset
  // chosen gives the drafter chosen, as its menus show them; gradio's ↺ put back the value the page opened with
  const presetValues = (block) => (window.specuiPresetValues || {})[block.id];
  const presetValue = (block) => {
    const follows = presetValues(block);
    const preset = follows && document.querySelector(`#${follows.preset} input`);
    const drafter = follows && document.querySelector(`#${follows.drafter} input:checked`);
    // the Chat tab's confidence stop at Tree width 2 or more: a tree's (preset_view.on_tree_width)
    const width = follows && follows.tree && document.querySelector(`#${follows.tree.width} input[type=number]`);
    const values = width && Number(width.value) > 1 ? follows.tree.values : follows && follows.values;
    return preset && drafter ? (values[preset.value] || {})[drafter.value] : undefined;
  };
  document.addEventListener("click", (event) => {
    const reset = event.target.closest ? event.target.closest(".reset-button") : null;
    const block = reset && reset.closest(".block");
    const slider = block && block.querySelector("input[type=range]");
    const value = slider && presetValue(block);
    if (!slider || value === undefined || slider.disabled) return;
    event.preventDefault();
    event.stopPropagation();  // gradio's own reset is not told
    slider.value = String(value);
    slider.dispatchEvent(new Event("input", { bubbles: true }));  // as a key on the slider moves it
  }, true);
  // Enter in a slider's number box commits what was typed, as leaving the box does: gradio puts a value out of
  // range back within it only when the box loses the focus, and blocks.py's `settled` puts it on the step's grid.
  // A slider's ↺ (gradio's "Reset to default value") was a Tab stop of its own between its number box and the slider,
  // eleven on the Chat tab between the controls that matter: it stays for the mouse, out of the Tab order (tidy,
  // above), and Escape in the number box or on the slider does what it does, as its tooltip and the two inputs'
  // aria-keyshortcuts say
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (!box || !["number", "range"].includes(box.type) || !["Enter", "Escape"].includes(event.key)) return;
    const block = box.closest(".block");
    if (!block || !block.querySelector("input[type=range]")) return;
    if (event.key === "Escape") {
      const reset = block.querySelector(".reset-button");
      if (!reset || event.isComposing) return;
      event.preventDefault();
      reset.click();
    } else if (box.type === "number") {
      box.blur();
      box.focus();
    }
  });
  // A list's pick is one server call, a list left as it came none (teach_keys.on_pick): gradio 6 fires a Dropdown's
  // input as the focus leaves it unchanged too, twice for a pick by the mouse (as it is picked, then as the focus
  // leaves it), and select for a pick by the mouse alone. specuiPick(id, value), the js of #id's input: unless the
  // value is the list's text as the focus came to it (or the pick passed on already), click #id-picked, whose click
  // is the pick's event
  document.addEventListener("focusin", (event) => {
    if (event.target.matches?.("input[role=combobox]")) event.target.dataset.specuiAtFocus = event.target.value;
  }, true);
  window.specuiPick = (id, value) => {
    const box = document.querySelector(`#${id} input`);
    if (box && box.dataset.specuiAtFocus === String(value)) return;
    if (box) box.dataset.specuiAtFocus = String(value);  // the pick's second input, as the focus leaves, is no pick
    document.querySelector(`#${id}-picked`)?.click();
  };
}
