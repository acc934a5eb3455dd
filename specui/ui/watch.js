() => {
  // One watcher of the page for the page's scripts (blocks.py runs this one first): window.specuiWatch(look) calls
  // look after each batch of elements added to or removed from the page, in the order the scripts asked, where each
  // of keys.js, charts.js and frames.js had a MutationObserver of its own on the whole page;
  // window.specuiWatch(look, attribute) calls look(changes) with a batch's changes of that attribute on any element
  // (address.js: a tab's aria-selected), where address.js had one too. One that throws is reported in the console,
  // and the others still run.
  const looks = [], attributes = new Set();
  const observer = new MutationObserver((changes) => {
    const added = changes.some((change) => change.type === "childList");
    for (const [look, attribute] of looks) {
      const mine = attribute && changes.filter((change) => change.attributeName === attribute);
      if (attribute ? !mine.length : !added) continue;
      try { look(mine); } catch (error) { console.error(error); }
    }
  });
  const observe = () => observer.observe(document.body, { childList: true, subtree: true,
    ...(attributes.size ? { attributes: true, attributeFilter: [...attributes] } : {}) });
  observe();
  window.specuiWatch = (look, attribute) => {
    looks.push([look, attribute || null]);
    if (attribute && !attributes.has(attribute)) {
      attributes.add(attribute);
      observe();  // the same observer, told the attribute as well (its other options unchanged)
    }
  };
}
