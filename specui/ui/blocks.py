"""The Gradio 6 Blocks app: the Chat tab's layout and wiring, and the `/generate` API around `Showcase`.

Layout: builder functions, each returning a dataclass of its components (`_chat_panel`, `_controls`,
`_results`, composed by `chat_tab`). The chat's handlers (a message's run, ↻ and ↶ on the last exchange, Clear)
are in `chat_handlers`; those of the preset menu, the drafter and Tree width in `preset_view` (`follow_chat`).
Handlers read their inputs by component (gradio passes a dict when the inputs are a set) and answer with a dict of the
outputs they change. The stylesheet is style.css, passed at `launch`.

Element ids that tests and automation rely on: #prompt #send #stop #clear #chat #compare #stats
#chart-speed #chart-acceptance #chart-tokens-per-round #chart-position #preset #drafter
#num-draft-tokens #adaptive-k #temperature #top-p #top-k #max-new-tokens #seed #show-rejected #race
#replay #chat-export #system-box #system-prompt, and arena mode's #arena (the checkbox), #arena-results,
#arena-table and #chart-arena; token trees' #tree-width #tree-nodes and the tree view's (`specui.ui.chat_tree`).
The API endpoint `/generate` answers one request as a dict (for `gradio_client`).

One generation runs at a time (a shared concurrency group, plus a lock per model pair inside
`Showcase`), so visitors queue instead of interleaving on a two-core CPU; a message shows in the chat at once
(`chat_handlers.waiting`), before its run's turn.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from specui import spaces
from specui.drafters import LABELS
from specui.loading import PairCache
from specui.settings import MAX_DRAFT_TOKENS, SettingsError
from specui.ui import (address, charts, chat_handlers, chat_tree, client_streams, closed_sessions, no_uploads, render,
                       stats, teach_handoff, teach_memory)
from specui.ui.api import serve_generate
from specui.ui.chat_handlers import App, clear, replay, respond, retry, stopped, undo, waiting
from specui.ui.preset_view import about, follow_chat, tell_resets
from specui.ui.request import DRAFTER_CHOICES, MAX_CONFIDENCE, MAX_TOP_K, Settings, in_page_words
from specui.ui.session import Showcase
from specui.ui.start_notice import tell_start_problem
from specui.ui.teaching import teaching_tab
from specui.ui.theme import PLOT_MIN_WIDTH, page_theme

log = logging.getLogger("specui.ui")
CSS = (Path(__file__).with_name("style.css")).read_text(encoding="utf-8")
# the page's script: one watcher of the page's changes (watch.js: keys, address, charts, frames), "Copy reply" buttons
# (copy.js), a tapped token's p and q (tokens.js), the keys (keys.js: the Teach tab's steps, a slider's Enter, Escape;
# chat_keys.js: the prompt box's focus after Send, Escape in it to stop), the address's tab (address.js), each chart
# named (charts.js), a streamed reply's frames drawn (frames.js: `pages.Pages`), old toasts closed (toasts.js)
JS = "() => {\n" + "".join(f"({(Path(__file__).with_name(name)).read_text(encoding='utf-8').strip()})();\n"
                            for name in ("watch.js", "copy.js", "tokens.js", "keys.js", "chat_keys.js",
                                         "address.js", "charts.js", "frames.js", "toasts.js")) + "}"
# the most events that wait for their turn (gradio's "Queue is full" past it). Gradio caps it at 1 on a ZeroGPU Space
# unless the app gives one (gradio/blocks.py `queue`: utils.is_zero_gpu_space()), so while one visitor decodes and a
# second waits, a third's Send, Decode or Next round was refused; elsewhere it stays unbounded, as gradio has it
ZERO_GPU_QUEUE_SIZE = 64
EXAMPLES = [  # chat and code for the default chat model; code to continue for the stdlib pair (no trailing
    # newline: the tokenizer merges a newline with the next line's indentation)
    "Write a Python function that checks whether a word is a palindrome, with a docstring.",
    "Explain what a hash table is, with a small example.",
    "Give me three tips for writing clear emails.",
    "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self):\n"
    "        self.items = []\n\n    def push(self, item):",
    "import unittest\n\n\nclass TestList(unittest.TestCase):\n\n    def test_append(self):",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"",
    "import os\nimport sys\n\n\ndef main(argv):",
    "Write a small HTML page with a <button> that says hello.",  # markup in a prompt and a reply is shown as text
]
TITLE = "specui: speculative decoding, visible"
INTRO = ("A small **draft** model guesses the next K tokens; the **target** checks them all in one forward pass, "
         "keeps the longest acceptable prefix and adds one token of its own. The output is distributed exactly as "
         "the target alone would write it (identical in greedy mode), only faster. Hover or tap any token to see "
         "p, q and its acceptance probability.")
ENGINE_GROUP = "engine"  # one generation at a time, UI and API alike
QUIET = {"queue": False, "api_visibility": "private"}
MAX_SEED_SHOWN = 2**53 - 1  # the seed box's most: the largest whole number a page's script holds exactly
DELETE_CACHE = (3600, 86400)  # gradio's cache sweep: every hour, the files over a day old


# -- layout --------------------------------------------------------------------------------------------


@dataclass
class ChatPanel:
    chat: gr.Chatbot
    prompt: gr.Textbox
    send: gr.Button
    stop: gr.Button
    clear: gr.Button


@dataclass
class Controls:
    preset: gr.Dropdown
    about: gr.Markdown
    drafter: gr.Radio
    k: gr.Slider
    adaptive: gr.Checkbox
    confidence: gr.Slider  # DecodeSettings.draft_confidence
    temperature: gr.Slider
    top_p: gr.Slider
    top_k: gr.Number
    penalty: gr.Slider  # DecodeSettings.repetition_penalty
    max_new: gr.Slider
    seed: gr.Number
    compare: gr.Checkbox
    arena: gr.Checkbox
    show_rejected: gr.Checkbox
    tree_width: gr.Slider
    tree_nodes: gr.Slider
    system: gr.Textbox

    def settings(self, data: dict) -> Settings:
        """The request's settings, read by component (raises SettingsError, in the page's words)."""
        try:
            return Settings.from_ui(preset=data[self.preset], drafter=data[self.drafter], num_draft_tokens=data[self.k],
                                    adaptive=data[self.adaptive], draft_confidence=data[self.confidence],
                                    temperature=data[self.temperature], top_p=data[self.top_p], top_k=data[self.top_k],
                                    repetition_penalty=data[self.penalty], max_new_tokens=data[self.max_new],
                                    seed=data[self.seed], compare=data[self.compare], arena=data[self.arena],
                                    tree_width=data[self.tree_width], tree_nodes=data[self.tree_nodes],
                                    system=data[self.system])
        except SettingsError as e:
            raise SettingsError(in_page_words(str(e))) from None

    @property
    def inputs(self) -> set:
        return {self.preset, self.drafter, self.k, self.adaptive, self.confidence, self.temperature, self.top_p,
                self.top_k, self.penalty, self.max_new, self.seed, self.compare, self.arena, self.tree_width,
                self.tree_nodes, self.system}


@dataclass
class Results:
    stats: gr.HTML
    race: gr.HTML
    replay: gr.Button
    plots: dict[str, gr.Plot]  # element id -> plot (the arena's chart-arena too)
    arena: gr.Column  # arena mode's table and chart, shown while the Arena box is ticked
    arena_table: gr.Dataframe
    export: gr.File  # the last run as JSON (`chat_handlers.run_export`), once it has finished
    to_teach: gr.Button  # the last message and the settings it ran with into the Teach tab (`teach_handoff`)


@dataclass
class ChatTab:
    panel: ChatPanel
    controls: Controls
    results: Results
    messages: gr.State  # the chat as shown (HTML), which the chatbot displays
    turns: gr.State  # the conversation as plain text, for chat templates (the exchanges whose run succeeded)
    exchanges: gr.State  # per shown exchange, the message as typed and whether `turns` kept it (for ↻ and ↶)
    race_html: gr.State  # the last race replay, for the Replay button
    tree: chat_tree.TreeView  # the last run's token trees
    tabs: gr.Tabs | None = None  # the app's tabs (set by `build`), for the way to the Teach tab

    @property
    def outputs(self) -> list:
        """Everything a chat request may change; the chatbot first (the /chat API's first output)."""
        r = self.results
        return [self.panel.chat, self.messages, self.turns, r.stats, *r.plots.values(), r.race, self.race_html,
                r.replay, r.arena_table, *self.tree.outputs, self.panel.prompt, self.exchanges, r.export, r.to_teach]


def _chat_panel() -> ChatPanel:
    gr.HTML(render.legend_html(), elem_id="legend")
    # Gradio's copy buttons would copy a message's markup: the conversation's text comes from copy.js instead
    copy_all = gr.Button("Copy conversation", size="sm", elem_id="copy-conversation", render=False)
    chat = gr.Chatbot(elem_id="chat", label="Conversation", show_label=False, height=460, render_markdown=False,
                      latex_delimiters=[], feedback_options=None, sanitize_html=True, buttons=[copy_all],
                      placeholder="The reply streams here, each token coloured by where it came from.")
    copy_all.click(None, None, None, js="() => window.specuiCopyConversation()", **QUIET)
    prompt = gr.Textbox(elem_id="prompt", label="Prompt", lines=4, max_lines=12,
                        placeholder="Type a prompt (Enter: a new line; Shift+Enter or Send: send it; Escape: stop). "
                                    "Base models continue it (Python code suits the bundled pair).")
    with gr.Row():
        send = gr.Button("Send", elem_id="send", variant="primary")
        stop = gr.Button("Stop", elem_id="stop", variant="stop")
        clear = gr.Button("Clear", elem_id="clear")
    gr.Examples(EXAMPLES, inputs=[prompt], label="Example prompts")
    return ChatPanel(chat, prompt, send, stop, clear)


def _controls(config) -> Controls:
    default = config.get(None)
    parts = dict(
        preset=gr.Dropdown(config.names, value=default.name, label="Preset (models.yaml)", elem_id="preset"),
        about=gr.Markdown(about(default), elem_id="preset-info"),
        drafter=gr.Radio(list(DRAFTER_CHOICES), value=LABELS[default.drafter], label="Drafter", elem_id="drafter"),
        k=gr.Slider(1, MAX_DRAFT_TOKENS, value=default.k_for(), step=1, label="K (draft tokens per round)",
                    elem_id="num-draft-tokens"),
        adaptive=gr.Checkbox(False, label="Adaptive K", elem_id="adaptive-k"),
        confidence=gr.Slider(0.0, MAX_CONFIDENCE, value=default.confidence_for(), step=0.05,
                             label="Confidence stop (0 = off)", elem_id="draft-confidence",
                             info="drafting stops once the draft's chance of being accepted whole falls below "
                                  "this; K is then the most. Tree width 2 or more sets it to 0 unless set by hand"),
        temperature=gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)", elem_id="temperature"),
        top_p=gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p", elem_id="top-p"),
        # no minimum=0: gradio's own check would refuse -5 without naming the field, printing a traceback
        top_k=gr.Number(0, label="Top-k (0 = off)", precision=0, elem_id="top-k"),
        penalty=gr.Slider(1.0, 2.0, value=1.0, step=0.05, label="Repetition penalty (1 = off)",
                          elem_id="repetition-penalty",
                          info="tokens already in the conversation become less likely (transformers' rule): fewer "
                               "loops, and every drafter's output is still exactly the target's"),
        max_new=gr.Slider(8, 512, value=128, step=8, label="Max new tokens", elem_id="max-new-tokens"),
        seed=gr.Number(0, label="Seed (-1 = random)", precision=0, elem_id="seed"),
        compare=gr.Checkbox(False, label="Compare with plain decoding", elem_id="compare"),
        arena=gr.Checkbox(False, label="Arena: plain decoding, then every drafter of the preset", elem_id="arena",
                          info="each at K, or at its own K (and confidence) where the preset gives it one"),
        show_rejected=gr.Checkbox(False, label="Show rejected drafts (struck through)", elem_id="show-rejected"),
        # last (then the system prompt), so the /chat event's positional inputs keep their order
        tree_width=chat_tree.width_slider(), tree_nodes=chat_tree.nodes_slider())
    with gr.Accordion("System prompt (chat presets)", open=False, elem_id="system-box"):
        parts["system"] = gr.Textbox(
            "", show_label=False, lines=2, max_lines=8, elem_id="system-prompt",
            placeholder="Instructions for the whole conversation, e.g. 'Answer in French.' Empty: the model's own "
                        "default. Base models continue the prompt and ignore it.")
    return Controls(**parts)


def _results() -> Results:
    stats_line = gr.HTML(stats.stats_html(None), elem_id="stats")
    export = gr.File(label="This run as JSON: the reply's tokens with their kind, p and q, the numbers, the settings "
                           "and the command that decodes it again",
                     visible=False, interactive=False, elem_id="chat-export")
    to_teach = gr.Button("Step through this message in the Teach tab ▸", size="sm", visible=False, elem_id="to-teach")
    with gr.Row():
        race = gr.HTML("", elem_id="race")
    replay = gr.Button("Replay race", elem_id="replay", size="sm", visible=False)
    with gr.Column(visible=False, elem_id="arena-results") as arena:
        table = gr.Dataframe(headers=stats.ARENA_HEADERS, value=[], interactive=False, elem_id="arena-table",
                             label="Drafter arena (engine time; the same prompt, settings and seed)")
        plots = {"chart-arena": gr.Plot(charts.arena_figure(), elem_id="chart-arena", show_label=False)}
    # two a row, one on a phone
    for row in (("chart-speed", "chart-acceptance"), ("chart-tokens-per-round", "chart-position")):
        with gr.Row():
            for elem_id, figure in ((e, charts.all_figures()[e]) for e in row):
                plots[elem_id] = gr.Plot(figure, elem_id=elem_id, show_label=False, min_width=PLOT_MIN_WIDTH)
    return Results(stats_line, race, replay, plots, arena, table, export, to_teach)


def chat_tab(config) -> ChatTab:
    """The Chat tab's components, inside the current `gr.Blocks`."""
    with gr.Tab("Chat", id="chat-tab", elem_id="chat-tab"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                panel = _chat_panel()
            with gr.Column(scale=1, min_width=280):
                controls = _controls(config)
        results = _results()
        return ChatTab(panel, controls, results, messages=gr.State([]), turns=gr.State([]), exchanges=gr.State([]),
                       race_html=gr.State(""), tree=chat_tree.tree_view())


def build(config, *, cache: PairCache | None = None, preload: bool = True,
          showcase: Showcase | None = None) -> gr.Blocks:
    """The whole app for a parsed models.yaml. `preload` loads and warms up the default pair in the background,
    printing its progress; a given `showcase` (e.g. a test's, to watch its runs) replaces the one built from `config`
    and `cache`."""
    app = App(showcase or Showcase(config, cache or PairCache()))
    if preload:
        app.showcase.preload_soon(config.get(None), progress=lambda line: print(f"specui: {line}", flush=True))
    # every run's download (and each Teach export) is a file gradio copies into its cache: an hourly sweep removes
    # those over a day old, so a long-lived Space does not fill its disk
    with gr.Blocks(title=TITLE, delete_cache=DELETE_CACHE) as demo:
        gr.Markdown(f"# {TITLE}\n{INTRO}", elem_id="intro")
        # the starting preset did not load: said above the tabs as a page opens, and asked again after each Chat run
        noticed = tell_start_problem(demo, app.showcase)
        memory = teach_memory.build()  # the Teach tab's last decoded settings, kept in the browser
        with gr.Tabs() as ui_tabs:
            ui = chat_tab(config)
            teach = teaching_tab(app.showcase, concurrency_id=ENGINE_GROUP, memory=memory)  # step-through, theory
        ui.tabs = ui_tabs
        _wire(ui, app, teach, noticed)

        def left(request: gr.Request):  # a page's session ended (its tab closed): its waits end, its run stops,
            app.stops.gone(chat_handlers.session_key(request))  # and its conversation's caches go
            app.showcase.forget(chat_handlers.session_key(request))

        demo.unload(left)
        address.wire(demo, ui_tabs)  # ?tab=teach opens the Teach tab; a refresh keeps the tab
        teach_memory.wire(demo, app.showcase.config, teach.controls, teach.memory,  # and the lesson's settings
                          status=teach.step.status)
        tell_resets(demo, app.showcase.config, ui.controls, teach.controls)  # a slider's ↺: the preset's (keys.js)
        serve_generate(app.showcase, concurrency_id=ENGINE_GROUP, concurrency_limit=1)
    # api_open=False: a queued event's direct route (POST /gradio_api/run/generate) is refused, where gradio left it
    # open and it ran beside the queued run, skipping the queue (one run at a time, a visitor's place in it)
    demo.queue(default_concurrency_limit=4, max_size=ZERO_GPU_QUEUE_SIZE if spaces.zero_gpu() else None,
               api_open=False)
    return demo


def _wire(ui: ChatTab, app: App, teach, noticed) -> None:
    p, c, r = ui.panel, ui.controls, ui.results

    def send(data: dict, request: gr.Request):  # gradio injects the request by its annotation
        yield from respond(app, ui, data, request)

    def again(data: dict, request: gr.Request):
        yield from retry(app, ui, data, request)

    def back(data: dict, request: gr.Request):
        return undo(app, ui, data, request)

    def show(data: dict, request: gr.Request):
        return waiting(app, ui, data, request)

    def show_again(data: dict, request: gr.Request):
        return waiting(app, ui, data, request, again=True)

    def fresh(request: gr.Request):
        return clear(app, ui, request)

    def emptied(messages: list, request: gr.Request):
        return clear(app, ui, request, shown=messages)

    def halt(request: gr.Request):
        return stopped(app, request)

    def refused(request: gr.Request):  # a run the queue refused (full, on ZeroGPU) never ends the wait `show` began
        return stopped(app, request, refused=True)

    inputs = {p.prompt, ui.messages, ui.turns, ui.exchanges, ui.tree.shown} | c.inputs  # the tree's: chat_tree
    # a run waits for its turn in the queue (one at a time): `show` puts the message in the chat at once, then the run
    # the run's trigger mode is "multiple": a message stopped while it waits keeps its place in the queue (it ends
    # when its turn comes), and gradio's default ("once") would skip the next message's run while that one pends
    queued = {"concurrency_id": ENGINE_GROUP, "concurrency_limit": 1, "show_progress": "hidden",
              "trigger_mode": "multiple"}
    # queued (so their gr.Error and gr.Warning reach the page) without a limit (so they never wait for a run); their
    # status goes to a State, which nothing draws: a refusal's red error state would cover the whole conversation
    # (the toast says why)
    at_once = {"concurrency_limit": None, "api_visibility": "private", "show_progress": "hidden",
               "show_progress_on": [ui.exchanges]}
    runs = [p.send.click(show, inputs, [p.chat], **at_once).success(send, inputs, ui.outputs, api_name="chat",
                                                                    api_visibility="undocumented", **queued),
            p.prompt.submit(show, inputs, [p.chat], **at_once).success(send, inputs, ui.outputs,
                                                                       api_visibility="private", **queued),
            # ↻ and ↶ under the last reply (gradio shows them once these listeners exist, and disables them while a
            # run streams)
            p.chat.retry(show_again, inputs, [p.chat], **at_once).success(again, inputs - {p.prompt}, ui.outputs,
                                                                         api_visibility="private", **queued)]
    for run in runs:
        run.failure(refused, None, [p.chat], **QUIET)
        noticed(run)  # a run that loaded the starting preset ends the notice that it did not load
    p.chat.undo(back, {ui.messages, ui.turns, ui.exchanges}, [p.chat, ui.messages, ui.turns, ui.exchanges, p.prompt],
                **at_once)
    p.stop.click(halt, None, [p.chat], **QUIET)
    gr.api(app.showcase.pages.drawn, api_name="drawn", queue=False, api_visibility="undocumented")  # frames.js
    p.clear.click(fresh, None, ui.outputs, **at_once)
    p.chat.clear(emptied, [ui.messages], ui.outputs, **at_once)  # the chat's own 🗑 clears the conversation too
    r.replay.click(lambda html: replay(ui, html), [ui.race_html], [r.race], **QUIET)
    # with the settings the message ran with (its run's JSON), not the controls as they are now
    teach_handoff.wire(ui, teach, max_seed=MAX_SEED_SHOWN, chats=app.showcase.chats)
    # the preset menu, the drafter radio and Tree width: one event, answered one at a time (preset_view.follow_chat)
    follow_chat(c, app.showcase.config)
    c.arena.change(lambda on: gr.update(visible=on), [c.arena], [r.arena], **QUIET)
    c.show_rejected.change(lambda on: gr.update(elem_classes=["show-rejected"] if on else []), [c.show_rejected],
                           [p.chat], **QUIET)
    chat_tree.wire(ui.tree)
    # a number box shows the value the run takes once it is left (or Enter is pressed in it: keys.js): gradio keeps
    # what was typed there (2.5 for K, 13 new tokens, 999 until the box loses the focus) while the slider's thumb
    # shows another value; a box out of range or off the step took a value the page did not show, or was refused
    for box in (c.k, c.confidence, c.temperature, c.top_p, c.penalty, c.max_new, c.tree_width, c.tree_nodes):
        box.release(None, [box], [box], js=settled(box.minimum, box.maximum, box.step), **QUIET)
    for box, hi in ((c.top_k, MAX_TOP_K), (c.seed, MAX_SEED_SHOWN)):  # blank: top-k off, a random seed
        for event in (box.blur, box.submit):
            event(None, [box], [box], js=settled(-1 if box is c.seed else 0, hi, 1, blank=True), **QUIET)


def settled(lo: float, hi: float, step: float, *, blank: bool = False) -> str:
    """The js of an event that puts a number box's value within [lo, hi] and on the step's grid from lo (a blank
    box stays blank when `blank`, else it takes lo), as a slider's thumb shows it and the run takes it."""
    lo, hi, step = (repr(x) for x in (lo, hi, step))  # as js reads them (never 9.0072e+15)
    places = len(step.partition(".")[2].rstrip("0"))  # 0.05: two decimal places, so 0.1 + 0.2 shows as 0.3
    return (f"(v) => {{ if (v === null || v === '') return {'v' if blank else lo}; const n = Number(v); "
            f"if (!Number.isFinite(n)) return {lo}; "
            f"const on = {lo} + Math.round((Math.min({hi}, Math.max({lo}, n)) - {lo}) / {step}) * {step}; "
            f"return Number(Math.min({hi}, on).toFixed({places})); }}")


def launch(demo: gr.Blocks, **kwargs):
    """`demo.launch` with specui's stylesheet, script and theme (Gradio 6 takes them at launch)."""
    kwargs.setdefault("css", CSS)
    kwargs.setdefault("js", JS)
    kwargs.setdefault("theme", page_theme())
    # the app takes no file: gradio's /gradio_api/upload kept any visitor's file of any size on disk and served it back
    kwargs.setdefault("max_file_size", "1kb")  # and gradio's other routes that read a form's files
    kwargs["app_kwargs"] = no_uploads.refused(kwargs.get("app_kwargs"))  # a cap of each file left 1,000 a request
    kwargs["app_kwargs"] = client_streams.watched(kwargs["app_kwargs"])  # a client gone stops its run
    launched = threading.Event()  # set as the launch returns: an app not running from then on was closed
    closed_sessions.keep_swept(demo, launched=launched)  # a closed tab's record leaves gradio's memory an hour after
    try:
        return demo.launch(**kwargs)
    finally:
        launched.set()
