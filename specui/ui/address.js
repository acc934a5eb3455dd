() => {
  // The page's address names the tab it shows (specui/ui/address.py): whenever a tab of the app's own is chosen (a
  // click, or a button that opens the Teach tab), `?tab=NAME` is written into the address without a reload, so a
  // refreshed page comes back to it. The tab's buttons carry the ids of address.TAB_IDS.
  const names = { "chat-tab": "chat", teach: "teach" };
  const write = (button) => {
    const name = names[button.dataset.tabId];
    if (!name || button.getAttribute("aria-selected") !== "true") return;
    const address = new URL(window.location.href);
    if (address.searchParams.get("tab") === name) return;
    address.searchParams.set("tab", name);
    window.history.replaceState(window.history.state, "", address);
  };
  window.specuiWatch((changes) => {  // watch.js: an element's aria-selected changed
    for (const change of changes) {
      if (change.target.matches && change.target.matches("button[role=tab][data-tab-id]")) write(change.target);
    }
  }, "aria-selected");
}
