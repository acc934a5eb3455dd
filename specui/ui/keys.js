() => {
  // The Teach tab steps with the keyboard, and so with a presenter's clicker (it sends PageDown / PageUp or the
  // arrow keys): → is "Next round" and ← "Previous" on the Teach tab, PageDown and PageUp too while the round
  // is on screen (elsewhere they scroll, as always); never while a text box has the focus.
  const keys = { ArrowRight: "#step-next", PageDown: "#step-next", ArrowLeft: "#step-prev", PageUp: "#step-prev" };
  const onScreen = (element) => {
    const box = element ? element.getBoundingClientRect() : null;
    return box !== null && box.bottom > 0 && box.top < window.innerHeight;
  };
  document.addEventListener("keydown", (event) => {
    const target = keys[event.key];
    if (!target || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const focus = document.activeElement;
    if (focus && (focus.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(focus.tagName))) return;
    const button = document.querySelector(target);
    if (!button || button.offsetParent === null || button.disabled) return;  // the Teach tab is not shown
    if (event.key.startsWith("Page") && !onScreen(document.querySelector("#step-view"))) return;
    event.preventDefault();
    button.click();
  });
}
