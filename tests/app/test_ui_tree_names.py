"""The Chat and Teach tabs' token-tree sections go by one name: "one round's tree" on the Chat tab and "a tree round"
on the Teach tab read as two things to a class that met both (F's audit). Built without a server."""

from __future__ import annotations

import gradio as gr

from specui.ui import chat_tree, teach_tree


def test_the_chat_and_teach_tabs_name_their_token_tree_section_alike():
    with gr.Blocks() as demo:
        chat_tree.tree_view()
        teach_tree._layout()
    names = {block.elem_id: block.label for block in demo.blocks.values() if isinstance(block, gr.Accordion)}
    assert names["tree-view"] == names["teach-tree"] == "Token trees: a tree round, node by node", names
