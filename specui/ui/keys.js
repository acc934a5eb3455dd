() => {
  // The Teach tab steps with the keyboard, and so with a presenter's clicker (it sends PageDown / PageUp or the
  // arrow keys): → or PageDown is "Next round", ← or PageUp "Previous", while the step-through is on screen
  // and no text box has the focus.
  const keys = { ArrowRight: "#step-next", PageDown: "#step-next", ArrowLeft: "#step-prev", PageUp: "#step-prev" };
  document.addEventListener("keydown", (event) => {
    const target = keys[event.key];
    if (!target || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const focus = document.activeElement;
    if (focus && (focus.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(focus.tagName))) return;
    const button = document.querySelector(target);
    if (!button || button.offsetParent === null || button.disabled) return;  // the Teach tab is not shown
    event.preventDefault();
    button.click();
  });
}
