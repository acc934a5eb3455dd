"""The Gradio 6 Blocks app: components, their element ids, and the events that drive `Showcase`.

Element ids that tests and automation rely on: #prompt #send #stop #clear #chat #compare #stats
#chart-speed #chart-acceptance #chart-tokens-per-round #chart-position #preset #drafter
#num-draft-tokens #adaptive-k #temperature #top-p #top-k #max-new-tokens #seed #show-rejected #race
#replay. The API endpoint `/generate` answers one request as a dict (for `gradio_client`).

One generation runs at a time (a shared concurrency group, plus a lock per model pair inside
`Showcase`), so visitors queue instead of interleaving on a two-core CPU.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import gradio as gr

from specui.loading import PairCache, pick_device
from specui.spaces import hardware_note
from specui.ui import charts, render, stats
from specui.drafters import LABELS
from specui.settings import MAX_DRAFT_TOKENS
from specui.ui.request import DRAFTER_CHOICES, Settings, SettingsError
from specui.ui.session import Showcase, decode
from specui.ui.teaching import teaching_tab

log = logging.getLogger("specui.ui")
CSS = (Path(__file__).with_name("style.css")).read_text(encoding="utf-8")
EXAMPLES = [  # no trailing newline: the tokenizer merges a newline with the next line's indentation
    "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n"
    "        self.items = []\n\n    def push(self, item):",
    "import unittest\n\n\nclass TestList(unittest.TestCase):\n\n    def test_append(self):",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"",
    "import os\nimport sys\n\n\ndef main(argv):",
    "    def __repr__(self):\n        return f\"{self.__class__.__name__}(",
    "<img src=x onerror=alert(1)>",
]
TITLE = "specui: speculative decoding, visible"
INTRO = ("A small **draft** model guesses the next K tokens; the **target** checks them all in one forward pass, "
         "keeps the longest acceptable prefix and adds one token of its own. The output is distributed exactly as "
         "the target alone would write it (identical in greedy mode), only faster. Hover any token to see p, q and "
         "its acceptance probability.")
ENGINE_GROUP = "engine"  # one generation at a time, UI and API alike


def _choice(preset) -> str:
    return LABELS[preset.drafter]


def build(config, *, cache: PairCache | None = None, preload: bool = True) -> gr.Blocks:
    """The whole app for a parsed models.yaml. `preload` loads the default pair in the background."""
    showcase = Showcase(config, cache or PairCache())
    stops: dict[str, threading.Event] = {}
    default = config.get(None)
    if preload:
        threading.Thread(target=_preload, args=(showcase, default), daemon=True, name="specui-preload").start()

    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(f"# {TITLE}\n{INTRO}", elem_id="intro")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat-tab", elem_id="chat-tab"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=420):
                        gr.HTML(render.legend_html(), elem_id="legend")
                        chat = gr.Chatbot(elem_id="chat", label="Conversation", show_label=False, height=460,
                                          render_markdown=False, latex_delimiters=[], feedback_options=None,
                                          sanitize_html=True,
                                          placeholder="The reply streams here, each token coloured by where it came from.")
                        prompt = gr.Textbox(elem_id="prompt", label="Prompt", lines=4, max_lines=12,
                                            placeholder="Type a prompt; base models continue it "
                                                        "(Python code suits the bundled pair).")
                        with gr.Row():
                            send = gr.Button("Send", elem_id="send", variant="primary")
                            stop = gr.Button("Stop", elem_id="stop", variant="stop")
                            clear = gr.Button("Clear", elem_id="clear")
                        gr.Examples(EXAMPLES, inputs=[prompt], label="Example prompts")
                    with gr.Column(scale=1, min_width=280):
                        preset = gr.Dropdown(config.names, value=default.name, label="Preset (models.yaml)", elem_id="preset")
                        about = gr.Markdown(_about(default), elem_id="preset-info")
                        drafter = gr.Radio(list(DRAFTER_CHOICES), value=_choice(default), label="Drafter", elem_id="drafter")
                        k = gr.Slider(1, MAX_DRAFT_TOKENS, value=default.num_draft_tokens, step=1, label="K (draft tokens per round)",
                                      elem_id="num-draft-tokens")
                        adaptive = gr.Checkbox(False, label="Adaptive K", elem_id="adaptive-k")
                        temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)",
                                                elem_id="temperature")
                        top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p", elem_id="top-p")
                        top_k = gr.Number(0, label="Top-k (0 = off)", precision=0, minimum=0, elem_id="top-k")
                        max_new = gr.Slider(8, 512, value=128, step=8, label="Max new tokens", elem_id="max-new-tokens")
                        seed = gr.Number(0, label="Seed (-1 = random)", precision=0, elem_id="seed")
                        compare = gr.Checkbox(False, label="Compare with plain decoding", elem_id="compare")
                        show_rejected = gr.Checkbox(False, label="Show rejected drafts (struck through)",
                                                    elem_id="show-rejected")
                stats_line = gr.HTML(stats.stats_html(None), elem_id="stats")
                with gr.Row():
                    race = gr.HTML("", elem_id="race")
                replay = gr.Button("Replay race", elem_id="replay", size="sm", visible=False)
                figures = charts.all_figures()
                with gr.Row():
                    speed = gr.Plot(figures["chart-speed"], elem_id="chart-speed", show_label=False)
                    acceptance = gr.Plot(figures["chart-acceptance"], elem_id="chart-acceptance", show_label=False)
                with gr.Row():
                    per_round = gr.Plot(figures["chart-tokens-per-round"], elem_id="chart-tokens-per-round", show_label=False)
                    position = gr.Plot(figures["chart-position"], elem_id="chart-position", show_label=False)
                messages = gr.State([])  # the chat as shown (HTML), which the chatbot displays
                turns = gr.State([])  # the conversation as plain text, for chat templates
                race_html = gr.State("")
                plots = [speed, acceptance, per_round, position]
            teaching_tab(showcase, concurrency_id=ENGINE_GROUP)  # the Teach tab: step-through, theory, experiments

        def respond(text, shown, history, preset_name, drafter_label, k_value, adaptive_on, temp, p_top, k_top,
                    new_tokens, seed_value, compare_on, request: gr.Request):
            key = request.session_hash if request is not None else ""
            stops[key] = halt = threading.Event()
            shown = [*shown, {"role": "user", "content": render.render_prompt(text or "")},
                     {"role": "assistant", "content": render.render_note("…")}]
            try:
                settings = Settings.from_ui(preset=preset_name, drafter=drafter_label, num_draft_tokens=k_value,
                                            adaptive=adaptive_on, temperature=temp, top_p=p_top, top_k=k_top,
                                            max_new_tokens=new_tokens, seed=seed_value, compare=compare_on)
            except SettingsError as e:
                shown[-1] = {"role": "assistant", "content": render.render_error(str(e))}
                gr.Warning(str(e))
                yield shown, shown, history, stats.stats_html(None, status="Error"), *[gr.skip()] * 7
                return
            run, first, last_figs = None, True, [gr.skip()] * 4
            try:
                for frame, run in decode(showcase, text, settings, history=history, stop=halt):
                    shown[-1] = {"role": "assistant", "content": frame.message}
                    if frame.error:
                        gr.Warning(frame.error)
                    if frame.figures:
                        last_figs = [frame.figures[p.elem_id] for p in plots]
                    figs = last_figs if frame.figures else [gr.skip()] * 4
                    if frame.race is not None:  # the race replay, once both runs are done
                        race_out = (frame.race, frame.race, gr.update(visible=True))
                    elif first:  # a new run hides the last one's race
                        race_out = ("", "", gr.update(visible=False))
                    else:
                        race_out = (gr.skip(), gr.skip(), gr.skip())
                    first = False
                    yield shown, shown, history, frame.stats, *figs, *race_out
            except Exception as e:  # a bug of ours: still a message, never a traceback, and the app serves on
                log.exception("the request failed")
                message = f"Something went wrong: {type(e).__name__}: {e}"
                shown[-1] = {"role": "assistant", "content": render.render_error(message)}
                yield shown, shown, history, stats.stats_html(None, status="Error"), *[gr.skip()] * 7
                return
            finally:
                stops.pop(key, None)
            if run is not None and run.error is None:
                history = [*history, {"role": "user", "content": text}, {"role": "assistant", "content": run.spec_text}]
                # the final charts again: a streaming client may have skipped the frame that carried them
                yield shown, shown, history, gr.skip(), *last_figs, *[gr.skip()] * 3

        inputs = [prompt, messages, turns, preset, drafter, k, adaptive, temperature, top_p, top_k, max_new, seed,
                  compare]
        outputs = [chat, messages, turns, stats_line, *plots, race, race_html, replay]
        queued = {"concurrency_id": ENGINE_GROUP, "concurrency_limit": 1, "show_progress": "hidden"}
        send.click(respond, inputs, outputs, api_name="chat", api_visibility="undocumented", **queued)
        prompt.submit(respond, inputs, outputs, api_visibility="private", **queued)

        def halt_current(request: gr.Request):
            event = stops.get(request.session_hash if request is not None else "")
            if event is not None:
                event.set()

        stop.click(halt_current, None, None, queue=False, api_visibility="private")

        def clear_all():
            empty = charts.all_figures()
            return ([], [], [], stats.stats_html(None), *[empty[p.elem_id] for p in plots], "", "",
                    gr.update(visible=False))

        clear.click(clear_all, None, outputs, queue=False, api_visibility="private")

        def replay_race(html_now):
            if not html_now:
                return gr.skip()
            replay_race.count += 1  # a new nonce: the HTML changes, so the browser restarts the animation
            return html_now.replace('data-nonce="', f'data-nonce="{replay_race.count}-', 1)

        replay_race.count = 0
        replay.click(replay_race, [race_html], [race], queue=False, api_visibility="private")

        def on_preset(name):
            try:
                chosen = config.get(name)
            except ValueError as e:
                return gr.skip(), gr.skip(), f"⚠ {e}"
            return gr.update(value=chosen.num_draft_tokens), gr.update(value=_choice(chosen)), _about(chosen)

        preset.change(on_preset, [preset], [k, drafter, about], queue=False, api_visibility="private")
        show_rejected.change(lambda on: gr.update(elem_classes=["show-rejected"] if on else []), [show_rejected],
                             [chat], queue=False, api_visibility="private")

        def generate(prompt: str, preset: str = default.name, drafter: str = "model",
                     num_draft_tokens: int = default.num_draft_tokens, adaptive: bool = False,
                     temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, max_new_tokens: int = 64,
                     seed: int = 0, compare: bool = False) -> dict:
            """Decode `prompt` speculatively (and plainly too with compare=True); returns the text, every
            token with its kind, p, q and acceptance probability, the stats and, with compare, the speedup
            and (greedy) whether both outputs are identical."""
            try:
                settings = Settings.from_ui(preset=preset, drafter=drafter, num_draft_tokens=num_draft_tokens,
                                            adaptive=adaptive, temperature=temperature, top_p=top_p, top_k=top_k,
                                            max_new_tokens=max_new_tokens, seed=seed, compare=compare)
            except SettingsError as e:
                raise gr.Error(str(e)) from None
            frame = run = None
            for frame, run in decode(showcase, prompt, settings):
                pass
            if frame.error:
                raise gr.Error(frame.error)
            return run.as_dict()

        gr.api(generate, api_name="generate", concurrency_id=ENGINE_GROUP, concurrency_limit=1)
    demo.queue(default_concurrency_limit=4)
    return demo


def _about(preset) -> str:
    lines = [preset.description or ""]
    if preset.memory:
        lines.append(f"*Needs {preset.memory}.*")
    runs_on = "cuda" if (preset.device_map or pick_device(preset.device) != "cpu") else "cpu"
    note = hardware_note(runs_on)
    if note:
        lines.append(f"*{note}*")
    drafter = "draft model" if preset.drafter == "model" else "prompt lookup (no draft model)"
    lines.append(f"Drafter: {drafter} · K = {preset.num_draft_tokens} · "
                 f"{'chat template' if preset.chat_template else 'base model: continues the prompt'}")
    return "\n\n".join(line for line in lines if line)


def _preload(showcase: Showcase, preset) -> None:
    try:
        showcase.cache.get(preset)
    except Exception as e:  # shown again, readably, when someone sends a prompt
        log.warning("could not preload preset %s: %s", preset.name, e)


def launch(demo: gr.Blocks, **kwargs):
    """`demo.launch` with specui's stylesheet and theme (Gradio 6 takes them at launch)."""
    kwargs.setdefault("css", CSS)
    kwargs.setdefault("theme", gr.themes.Soft())
    return demo.launch(**kwargs)
