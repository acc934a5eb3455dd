() => {
  // One watcher of the page for the page's scripts (blocks.py runs this one first): window.specuiWatch(look) calls
  // look after each batch of elements added to or removed from the page, in the order the scripts asked, where each
  // of keys.js, charts.js and frames.js had a MutationObserver of its own on the whole page. One that throws is
  // reported in the console, and the others still run.
  const looks = [];
  new MutationObserver(() => {
    for (const look of looks) {
      try { look(); } catch (error) { console.error(error); }
    }
  }).observe(document.body, { childList: true, subtree: true });
  window.specuiWatch = (look) => { looks.push(look); };
}
