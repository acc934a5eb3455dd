() => {
  // A streamed reply's frames and the server: each frame's stats line carries its mark (`specui-frame`, "tag:number");
  // once the page has drawn it, this says so to the server (the app's /drawn endpoint, specui/ui/pages.py), which
  // sends the next frame only when the page has drawn all but the last: frames never pile up in a slow page, and a
  // click (Stop) waits behind one frame at most. Nothing is said twice; a failed call is left (the server goes on).
  let said = "";
  const root = () => (window.gradio_config && window.gradio_config.root) || "";
  const look = () => {
    const mark = document.querySelector("#stats .specui-frame");
    const frame = mark && mark.dataset.frame;
    if (!frame || frame === said) return;
    said = frame;
    fetch(`${root()}/gradio_api/run/drawn`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ data: [frame] }),
    }).catch(() => {});
  };
  window.specuiWatch(look);  // watch.js: the page changed
}
