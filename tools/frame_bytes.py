"""The bytes a streamed chat reply puts on the wire: each frame's message diffed against the last, as gradio's queue
sends a streamed output (`gradio.utils.diff` of the Chatbot's values: a string that grew at its end goes as an append
of what it gained, any other change whole).

    python -m tools.frame_bytes [--preset NAME] [--max-new-tokens 200] [--prompt TEXT] [--no-compare | --arena]

Runs the showcase's own frames (`Showcase.run`, greedy, no charts, no text interval) on the preset (default:
models.yaml's default, the chat model), with compare off and then on (--arena: an arena, plain decoding and then
every drafter of the preset, in their place), and prints per run the frames, how many left
the message as it was (a load's progress, the stats alone) and how many went as appends, the bytes sent (the first
frame whole, then each diff's JSON) and the bytes a frame. The showcase paces frames by the time a page takes to
draw the message, so the count of frames varies with the machine; compare bytes a frame, run at two commits.
"""

from __future__ import annotations

import argparse
import json

PROMPT = "Write a short story about a lighthouse keeper."


def edits(old: str, new: str) -> list:
    """What gradio's queue sends when the chat's message `old` becomes `new`: the Chatbot's values as it sends them
    (its postprocess; the app's Chatbot: sanitised, no Markdown), diffed as the queue diffs a streamed output."""
    import gradio as gr
    from gradio.utils import diff

    chat = gr.Chatbot(render_markdown=False, sanitize_html=True)
    return diff(*(chat.postprocess([{"role": "assistant", "content": m}]).model_dump() for m in (old, new)))


def measure(show, prompt: str, settings) -> dict:
    """`show.run`'s frames for `prompt` with `settings`: frames, appends and bytes sent (`count`)."""
    return count([frame.message for frame, _ in show.run(prompt, settings, figures=False)])


def count(messages: list[str]) -> dict:
    """A message's frames on the wire: frames, those that left it unchanged, appends, bytes sent and bytes a frame."""
    sent, appends, unchanged = len(messages[0].encode()), 0, 0
    for old, new in zip(messages, messages[1:]):
        edits_sent = edits(old, new)
        sent += len(json.dumps(edits_sent, ensure_ascii=False).encode())
        unchanged += not edits_sent  # a frame for the stats or a load's progress alone
        appends += bool(edits_sent) and all(edit[0] == "append" for edit in edits_sent)
    return {"frames": len(messages), "unchanged": unchanged, "appends": appends, "bytes": sent,
            "bytes_a_frame": round(sent / len(messages))}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default=None, help="a preset of models.yaml (default: its default)")
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--prompt", default=PROMPT)
    modes = ap.add_mutually_exclusive_group()
    modes.add_argument("--no-compare", action="store_true", help="compare off only")
    modes.add_argument("--arena", action="store_true", help="an arena's frames, in place of compare off and on")
    args = ap.parse_args(argv)
    from specui.loading import PairCache
    from specui.presets import load_config
    from specui.ui.session import Settings, Showcase

    config = load_config(None)
    preset = config.get(args.preset).name
    show = Showcase(config, PairCache(), text_interval=0, chart_interval=1e9)
    rows = []
    compares = (False,) if args.no_compare else (False, True)
    for mode in [{"arena": True}] if args.arena else [{"compare": compare} for compare in compares]:
        settings = Settings(preset=preset, max_new_tokens=args.max_new_tokens, **mode)
        row = {**mode, **measure(show, args.prompt, settings)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
