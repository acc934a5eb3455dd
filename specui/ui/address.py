"""The page's address names its tab: `?tab=teach` opens the Teach tab, and choosing a tab writes its name there.

A teacher bookmarks `http://host:7860/?tab=teach` for the projector, and a page refreshed mid-lesson comes back to
the tab it showed (with the Teach tab's last decoded run, decoded again at the round it showed: `teach_memory`).
The address is written by the page's script (`address.js`: `history.replaceState`, no reload, the rest of the
address kept) and read by the server when the page loads.
"""

from __future__ import annotations

import gradio as gr

# the address's name of each tab -> the tab's id in the app (blocks.chat_tab, teaching.teaching_tab)
TAB_IDS = {"chat": "chat-tab", "teach": "teach"}


def opening_tab(request: gr.Request):
    """The tab a page opens on: the one its address names (`?tab=teach`), else the Chat tab — which the page shows
    already, so then nothing is sent: an answer that came after a click on another tab would take it back."""
    name = str(request.query_params.get("tab") or "chat").strip().lower()
    tab = TAB_IDS.get(name, TAB_IDS["chat"])
    return gr.skip() if tab == TAB_IDS["chat"] else gr.Tabs(selected=tab)


def wire(demo: gr.Blocks, tabs: gr.Tabs) -> None:
    """Open the page on the tab its address names (the page's script, address.js, writes the name when a tab is
    chosen)."""
    demo.load(opening_tab, None, tabs, show_progress="hidden", api_visibility="private", queue=False)
