() => {
  // The Chat tab's prompt box and the keyboard: after Send is clicked the focus goes back into the box, so the next
  // message is typed at once (it stayed on the button); not after a tap on a touch screen, where the box's focus
  // would open the on-screen keyboard over the streaming reply. Escape in the box stops the reply being written, or
  // a message waiting for its turn, as the Stop button does (Shift+Enter sends: Gradio's submit).
  document.addEventListener("click", (event) => {
    if (!event.target.closest || !event.target.closest("#send") || event.pointerType === "touch") return;
    const box = document.querySelector("#prompt textarea");
    if (box) box.focus({ preventScroll: true });
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing || !event.target.closest || !event.target.closest("#prompt")) return;
    const stop = document.querySelector("#stop");
    if (stop) stop.click();
  });
}
