() => {
  // A toast (toasts.py) says why what was last asked of the page was refused ("Type a prompt first.", a setting out
  // of range, a chat message not yet answered) or what went wrong in a run. It goes once a run is asked for again:
  // gradio kept it its 10 s, over the reply that then streamed. Asking again is a click of Send, of the chat's ↻, of
  // either Decode or of an experiment's Run, or Shift+Enter in the prompt box (gradio's submit); a refusal of that run
  // shows a toast of its own, afresh (the same refusal twice had stacked two toasts).
  const RUNS = "#send, #chat button[aria-label=Retry], #step-start, #tree-step-start, button[id$='-run']";
  const dismiss = () => {
    for (const close of document.querySelectorAll(".toast-body .toast-close")) close.click();  // gradio's ×
  };
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest(RUNS)) dismiss();
  }, true);
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !event.shiftKey || event.isComposing || !event.target.closest) return;
    if (event.target.closest("#prompt")) dismiss();
  }, true);
}
