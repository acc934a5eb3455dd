"""The Chat tab's handlers: a message's run (`respond`), the last exchange run again (`retry`, the chat's ↻ under
the last reply: the same message with the settings as they are now, e.g. another drafter or K) or taken back into
the prompt box to be edited (`undo`), Clear, and the race's replay.

The conversation lives in three states that move together: `messages` (the chat as shown, HTML), `turns` (the
conversation as plain text, for chat templates: only the exchanges whose run succeeded) and `exchanges` (per
shown exchange, the message as typed and whether `turns` kept it), so the last exchange can be taken back
whether its run succeeded or not. Handlers read their inputs by component (`ui` is `blocks.ChatTab`) and answer
with a dict of the outputs they change.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from specui import arena
from specui.lesson import json_safe
from specui.presets import COMMAND_LINE, DEFAULT_CONFIG
from specui.prompt_cache import chat_history
from specui.ui import (arena_view, charts, chat_tree, exports, render, stats, teach_charts, teach_memory, teach_prepare,
                       teaching)
from specui.ui.exports import Exports
from specui.ui.request import SettingsError, in_page_words, seeded
from specui.ui.runs import Run, reply
from specui.ui.session import Showcase, decode
from specui.ui.stops import Stops
from specui.ui.teach_view import render_measured
from specui.ui.teaching import TEACH_K_MAX, TEACH_MAX_NEW
from specui.ui.toasts import refusal, warn

log = logging.getLogger("specui.ui")
CONTEXT_OVERFLOW = re.compile(r"the prompt \(\d+ tokens[^)]*\) plus max_new_tokens \(\d+\) is \d+ tokens, more than")
STOPPED_WAITING = "Stopped before it started."
NOT_RUN = "The app is busy: this message did not run. Send it again in a minute."


@dataclass
class App:
    """What the Chat tab's handlers share: the showcase (config, pairs, locks) and the Stop events."""

    showcase: Showcase
    stops: Stops = field(default_factory=Stops)
    exports: Exports = field(default_factory=lambda: Exports("specui-chat-"))


def session_key(request: gr.Request | None) -> str:
    return request.session_hash if request is not None else ""


def respond(app: App, ui, data: dict, request: gr.Request | None = None, *, again: bool = False):
    """Stream one chat request: yields dicts of the outputs that changed (the rest stay as they are). `again`: the
    message is the last exchange's, run again (`retry`), so the prompt box is left as it is."""
    r, chat = ui.results, ui.panel.chat
    text, history = data[ui.panel.prompt], data[ui.turns]
    sent = [*data[ui.exchanges], {"text": text or "", "kept": False}]
    shown = _asked(data[ui.messages], text)

    def page(message: str, changes: dict) -> dict:
        shown[-1] = {"role": "assistant", "content": message}
        return {chat: shown, ui.messages: shown, ui.turns: history, ui.exchanges: sent, **changes}

    key = session_key(request)
    # a page's Send waited first (`waiting`), an API client's call to /chat never does: only a page's frames are marked
    # and paced by what it drew (`pages.Paced`)
    a_page = app.stops.newer(key)
    # the event this message waited with (`waiting`), taken off the queue first: every way out below ends it, or the
    # session would stay busy and its next message be refused as "still being answered"
    halt = app.stops.start(key)
    run, figures, hidden, drawn, taken = None, {}, False, {}, False
    try:
        if halt.is_set():  # Stop was pressed while it waited for its turn, and the page said so then
            if app.stops.newer(key):  # a newer message shows now, and its own run comes next: leave it be
                yield gr.skip()  # every output as it is
            else:
                yield page(render.render_note(STOPPED_WAITING), {r.stats: stats.stats_html(None, status="Stopped")})
            return
        try:
            settings = seeded(ui.controls.settings(data))  # -1: a seed drawn now, shown and typed back
        except SettingsError as e:
            warn(str(e))
            yield page(render.render_error(str(e)), {r.stats: stats.stats_html(None, status="Error")})
            return
        # a chat takes the message into the conversation, so the box empties for the next one (it comes back if the
        # run fails); a base model's prompt stays, to be edited and run again
        chatting = _is_chat(app, settings.preset) and not again
        for frame, run in decode(app.showcase, text, settings, history=history, stop=halt, owner=key,
                                 page=a_page):
            message = frame.message
            if frame.error:
                said = _said_on_page(frame.error, settings.system if _is_chat(app, settings.preset) else "")
                message = message if said == frame.error else render.render_error(said)
                warn(said)
            changes = {r.stats: frame.stats}
            if frame.figures:
                figures = {r.plots[elem_id]: figure for elem_id, figure in frame.figures.items()}
                if frame.table is not None:  # the arena's table comes with its chart
                    figures[r.arena_table] = frame.table
                changes.update(unchanged_left_out(drawn, figures))
            if frame.race is not None:  # the race replay, once both runs are done
                changes.update({r.race: frame.race, ui.race_html: frame.race, r.replay: gr.update(visible=True)})
            elif not hidden:  # a new run hides the last one's race, download and way to the Teach tab
                changes.update({r.race: "", ui.race_html: "", r.replay: gr.update(visible=False),
                                r.export: gr.update(value=None, visible=False), r.to_teach: gr.update(visible=False)})
            hidden = True
            if chatting and not taken:
                changes[ui.panel.prompt], taken = "", True
            yield page(message, changes)
    except Exception as e:  # a bug of ours: still a message, never a traceback, and the app serves on
        log.exception("the request failed")
        message = f"Something went wrong: {type(e).__name__}: {e}"
        back = {ui.panel.prompt: text} if taken else {}
        yield page(render.render_error(message), {r.stats: stats.stats_html(None, status="Error"), **back})
        return
    finally:
        app.stops.end(key, halt)
    if taken and run is not None and run.error is not None:
        yield page(shown[-1]["content"], {ui.panel.prompt: text})  # not taken after all: the message comes back
    if run is not None and run.error is None:
        dropped = history[:run.left_out]
        read = _read(app, run, history)
        history = [*history[run.left_out:], {"role": "user", "content": text}, run.reply_message()]
        forgot = _forget(sent, sum(m.get("role") == "user" for m in dropped))
        sent[-1] = {"text": text, "kept": True, **({"left_out": dropped, "forgot": forgot} if dropped else {})}
        # the final charts (and table) again: a streaming client may have skipped the frame that carried them
        tree = chat_tree.after_run(ui.tree, run.trees, data.get(ui.tree.shown, chat_tree.UNKNOWN))  # the page's round
        yield page(shown[-1]["content"], {**figures, **tree,
                                          r.export: _download(app, run, text, read),
                                          r.to_teach: gr.update(visible=True)})


def unchanged_left_out(drawn: dict, updates: dict) -> dict:
    """The `updates` (component -> plotly figure or table rows) that differ from what the page was last sent for
    that component (`drawn`: component -> its JSON, updated here). Each chart sent is a whole plotly redraw in the
    browser (tens of milliseconds on a small machine), and some stand still for most of a run's frames (an arena's
    per-round charts, its table between contestants): sent again and again, they kept the browser busy."""
    changed = {}
    for component, value in updates.items():
        seen = value.to_json() if hasattr(value, "to_json") else repr(value)
        if drawn.get(component) != seen:
            drawn[component], changed[component] = seen, value
    return changed


def _forget(sent: list, count: int) -> list[int]:
    """The oldest `count` exchanges that `turns` kept are no longer in it (they were left out of a turn that the
    whole conversation did not fit): they stay in the chat as shown, not kept, so ↶ of a later exchange never takes
    them out of `turns`. Returns their indices: ↶ of the turn that left them out keeps them again (`take_back`)."""
    forgot = []
    for i, exchange in enumerate(sent):
        if len(forgot) < count and exchange["kept"]:
            sent[i] = {**exchange, "kept": False}
            forgot.append(i)
    return forgot


def run_export(run: Run, *, prompt: str = "", conversation=(), command: str | None = None) -> dict:
    """The Chat tab's download of a finished run: the preset and settings, the message (`prompt`) and the
    `conversation` before it that the run read (the answers with the tokens the model wrote), the `command` that
    decodes it again (`reproduction`) and the versions that decoded it, then the API's answer (the reply's
    tokens with their kind, p, q and acceptance probability, its numbers, the plain run's in compare mode), and in
    arena mode each contestant's reply, tokens and numbers (greedy: whether it equals plain decoding's), with the K
    and the confidence stop it raced with (None for plain decoding), as the table reads them: its K column is
    `arena.k_said(num_draft_tokens, draft_confidence, name)` ("≤ 6"); NaN and infinities as null, as
    `lesson.export_run` gives the Teach tab's."""
    out = {"preset": run.preset, "settings": dataclasses.asdict(run.settings), "prompt": prompt,
           "conversation": list(conversation), "command": command, "versions": exports.versions(), **run.as_dict()}
    if run.settings.arena:
        plain = run.arena.get(arena.PLAIN)
        standings = {s.name: s for s in outcome.standings} if (outcome := arena_view.outcome(run)) else {}
        out["arena"] = {
            name: {"text": reply(run.arena_views.get(name, ()), result), "token_ids": list(result.token_ids),
                   "num_draft_tokens": standings[name].k if name in standings else None,  # as chosen: the table's
                   # the stop it raced with (its own, the preset's, on a chain; the slider's on a tree): the table's ≤
                   "draft_confidence": (standings[name].confidence
                                        if name in standings and name != arena.PLAIN else None),
                   "stats": standings[name].stats.as_dict() if name in standings else None,
                   "identical_to_plain": (result.token_ids == plain.token_ids
                                          if run.settings.greedy and plain is not None else None)}
            for name, result in run.arena.items()}
    return json_safe(out)


def _read(app: App, run: Run, history: list) -> list:
    """The conversation before the message that `run` read (`Showcase.encode`'s): a chat preset's kept turns but the
    oldest it left out and those a base model wrote; a base model's run reads none."""
    if not _is_chat(app, run.preset):
        return []
    return chat_history(history[run.left_out:], lambda name: name is not None and app.showcase.chats(name) is False)


def reproduction(app: App, run: Run, prompt: str, conversation) -> str | None:
    """The `python -m specui` command that decodes `run` again to the same tokens (`exports.command_line`), or None
    where none does: a conversation's later message (the command line decodes a message alone), the arena, a pair
    given to app.py by --target (no preset of a models.yaml), a control character in it (`exports.pastes_as_typed`)."""
    if conversation or run.settings.arena or run.preset == COMMAND_LINE:
        return None
    config = Path(app.showcase.config.path).resolve()
    return exports.command_line(preset=run.preset, settings=run.settings, prompt=prompt,
                                chats=app.showcase.chats(run.preset) is True,
                                config=None if config == Path(DEFAULT_CONFIG).resolve() else str(config))


def _download(app: App, run: Run, prompt: str = "", conversation=()):
    try:
        command = reproduction(app, run, prompt, conversation)
        data = run_export(run, prompt=prompt, conversation=conversation, command=command)
        path = app.exports.write(data, f"specui-run-{run.preset}-seed{run.replied.seed}.json")
    except Exception:  # the reply stands without its download
        log.exception("writing the run's download")
        return gr.update(value=None, visible=False)
    return gr.update(value=path, visible=True)


def waiting(app: App, ui, data: dict, request: gr.Request | None = None, *, again: bool = False) -> dict:
    """What Send (and ↻) do at once, before the run's turn in the queue: the message shows in the chat with an
    ellipsis, or a note that it waits for the run in progress, and Stop from then on stops it before it starts. The
    run's first frame replaces this. A session whose last message is still being answered (or waits), and an empty
    message, are refused (a refusal, so the run chained after this one does not start)."""
    key = session_key(request)
    if app.stops.busy(key):  # a run asked for now would read the conversation without the reply being written
        raise refusal("Your last message is still being answered: wait for the reply, or press Stop.")
    messages, text = data[ui.messages], data.get(ui.panel.prompt)
    if not again and not (text or "").strip():  # nothing to send: no empty message in the chat, no run
        raise refusal("Type a prompt first.")
    if again:
        taken = take_back(messages, data[ui.turns], data[ui.exchanges])
        if taken is None:
            raise refusal("There is no message to run again: type one and press Send.")
        messages, _, _, text = taken
    busy = app.showcase.live or app.stops.any_busy()  # the API's runs, the chat's (before this one waits too)
    note = "Waiting for the run in progress to finish (one runs at a time)…" if busy else "…"
    shown = _asked(messages, text, note)
    app.stops.wait(key, shown)
    return {ui.panel.chat: shown}


def stopped(app: App, request: gr.Request | None = None, *, refused: bool = False):
    """Stop: this session's run ends at its next round; one still waiting for its turn shows at once that it stopped
    (its own note, when the queue reaches it, says the same). `refused`: the queue refused the message's run (it
    never starts), which the chat says in its place."""
    shown = app.stops.never_ran(session_key(request)) if refused else app.stops.set(session_key(request))
    if not shown:
        return gr.skip()
    return [*shown[:-1], {"role": "assistant", "content": render.render_note(NOT_RUN if refused else STOPPED_WAITING)}]


def _asked(messages: list, text: str | None, note: str = "…") -> list:
    """The chat as shown with a new message and, in place of its reply, `note`."""
    return [*messages, {"role": "user", "content": render.render_prompt(text or "")},
            {"role": "assistant", "content": render.render_note(note)}]


def take_back(messages: list, turns: list, exchanges: list) -> tuple[list, list, list, str] | None:
    """The conversation without its last exchange, and that exchange's message as typed (None: nothing to take
    back). The exchange leaves `turns` only if its run had put it there; if that run left older messages out (the
    whole conversation did not fit), they come back, kept again, as before it."""
    if not exchanges or len(messages) < 2:
        return None
    last, earlier = exchanges[-1], exchanges[:-1]
    if not last["kept"]:
        return messages[:-2], turns, earlier, last["text"]
    forgot = set(last.get("forgot", ()))
    earlier = [{**e, "kept": True} if i in forgot else e for i, e in enumerate(earlier)]
    return messages[:-2], [*last.get("left_out", ()), *turns[:-2]], earlier, last["text"]


def retry(app: App, ui, data: dict, request: gr.Request | None = None):
    """The chat's ↻: the last exchange's message run again, with the settings as they are now."""
    taken = take_back(data[ui.messages], data[ui.turns], data[ui.exchanges])
    if taken is None:
        app.stops.end(session_key(request), app.stops.start(session_key(request)))  # what `waiting` queued
        warn("There is no message to run again: type one and press Send.")
        return
    messages, turns, exchanges, text = taken
    yield from respond(app, ui, {**data, ui.panel.prompt: text, ui.messages: messages, ui.turns: turns,
                                 ui.exchanges: exchanges}, request, again=True)


def undo(app: App, ui, data: dict, request: gr.Request | None = None) -> dict:
    """The chat's ↶: the last exchange leaves the conversation and its message goes back into the prompt box."""
    if _writing(app, request):  # the chat disables ↶ while a run streams, not while one waits
        return {}
    taken = take_back(data[ui.messages], data[ui.turns], data[ui.exchanges])
    if taken is None:
        return {}
    messages, turns, exchanges, text = taken
    return {ui.panel.chat: messages, ui.messages: messages, ui.turns: turns, ui.exchanges: exchanges,
            ui.panel.prompt: text}


def to_teach_outputs(ui, teach) -> list:
    """What `to_teach` may change: its event's outputs (gradio refuses an update of anything else)."""
    t, s = teach.controls, teach.step
    return [t.prompt, t.preset, t.drafter, t.k, t.confidence, t.temperature, t.penalty, t.max_new, t.seed, t.context,
            s.status, ui.tabs, teach.run, s.view, s.residual, s.theory_tokens, s.theory_speedup, s.measured, s.export,
            teach.compare.view, teach.timer, t.play, teach.memory]


def lesson_cleared(teach, data: dict) -> dict:
    """The Teach tab's step-through as a fresh page shows it, for a message handed to it: no run, no round, no
    second drafter's round (its choice's note: `data[teach.compare.second]`), the theory charts without a measured
    point, no export, the auto-play off. The page's `Shown` (`data[teach.index]`, absent: none to move) leaves the
    last lesson, so Next decodes the message at round 1 (`teaching.decode_first`) rather than step the old rounds.
    The browser's memory (`data[teach.memory]`, absent: left as it is) keeps the lesson's prompt and settings but not
    its round: a refresh on the Teach tab decoded the lesson again, a ZeroGPU call, and showed the round left."""
    shown = data.get(teach.index)
    if shown is not None:
        with shown.lock:
            shown.move(None, 0)
    s = teach.step
    return {teach.run: None, **teaching.show_round(teach, None, 0, None, data.get(teach.compare.second)),
            s.theory_tokens: teach_charts.theory_tokens_figure(), s.measured: render_measured(None),
            s.theory_speedup: teach_charts.theory_speedup_figure(), s.export: None, **teaching.stopped(teach),
            **({teach.memory: teach_memory.at_round(data[teach.memory], 0)} if teach.memory in data else {})}


def to_teach(ui, teach, data: dict, *, chats=None) -> dict:
    """"Step through this message in the Teach tab": the Teach tab's prompt and settings become the chat's last
    message and the settings in `data` (`teach_handoff.step_through` puts there those the message ran with), with the
    conversation before it and the system prompt as the chat's run read them (the turns it kept: the oldest left
    out where the context could not hold them all), and the Teach tab opens on it, the last lesson's rounds gone
    (`lesson_cleared`); its Decode then steps through that message round by round. `teach` is the
    `teaching.TeachTab`; `chats(preset)` (the showcase's) is False for a base model, which reads no conversation.
    What the Teach tab cannot take as it is (K and new tokens beyond its ranges, top-p, top-k) is said in its status
    line, and so is the conversation it decodes the message after."""
    if not data[ui.exchanges]:
        return {}
    c, t = ui.controls, teach.controls
    k, max_new, seed = int(data[c.k]), int(data[c.max_new]), data[c.seed]
    last = data[ui.exchanges][-1]
    earlier = data[ui.turns][:-2] if last["kept"] else data[ui.turns]  # the conversation before the message
    base = chats is not None and chats(data[c.preset]) is False
    context = None if base else {"history": earlier, "system": data[c.system] or "", "prompt": last["text"]}
    fitted = min(TEACH_MAX_NEW, max(8, 8 * round(max_new / 8)))
    notes = [f"K {k} became {TEACH_K_MAX}" if k > TEACH_K_MAX else "",
             f"{max_new} new tokens became {fitted}" if fitted != max_new else "",
             "it samples without top-p and top-k" if data[c.top_p] < 1 or data[c.top_k] else "",
             # -1 only where the run's own seed is not known (`teach_handoff.as_it_ran`: its download unread)
             "the seed was random: the Teach tab's is kept" if seed is None or seed < 0 else ""]
    said = "; ".join(n for n in notes if n)
    status = " ".join(part for part in (
        "The Chat tab's last message and settings: press **Decode** to step through it round by round.",
        teach_prepare.handed_note(teach_prepare.conversation(context)), f"Here {said}." if said else "") if part)
    updates = {t.prompt: last["text"], t.preset: data[c.preset], t.drafter: data[c.drafter],
               t.k: min(k, TEACH_K_MAX), t.confidence: data[c.confidence], t.temperature: data[c.temperature],
               t.penalty: data[c.penalty], t.max_new: fitted, t.context: context, teach.step.status: status,
               ui.tabs: gr.Tabs(selected="teach"), **lesson_cleared(teach, data)}
    if seed is not None and seed >= 0:
        updates[t.seed] = seed
    return updates


def _writing(app: App, request: gr.Request | None) -> bool:
    """Whether this session's reply is being written or waits (then a warning says to press Stop first)."""
    busy = app.stops.busy(session_key(request))
    if busy:
        warn("A reply is still being written: press Stop first.")
    return busy


def _said_on_page(error: str, system: str = "") -> str:
    """A run's error in the page's words: the window's refusal (`settings.context_overflow`) names Max new tokens,
    and a chat's system prompt (`system`: the run read it), which the prompt it counted held."""
    if system and CONTEXT_OVERFLOW.match(error):
        error = error.replace(" tokens) plus", " tokens, with the system prompt) plus", 1).replace(
            "shorten the prompt or", "shorten the message or the system prompt, or", 1)
    return in_page_words(error) if CONTEXT_OVERFLOW.match(error) else error


def _is_chat(app: App, preset: str | None) -> bool:
    """Whether `preset` (None: the default) wraps messages in a chat template (False when it is unknown)."""
    return app.showcase.chats(preset) is True


def clear(app: App, ui, request: gr.Request | None = None, *, shown: list | None = None) -> dict:
    """Clear, or the chat's own 🗑: a new conversation, the old one's caches gone now as a closed tab's (`forget`)
    (refused while a reply is being written or waits: its run would write the old conversation back when it ends).
    `shown`: the conversation as it was, for the 🗑, which has emptied the chat on the page: refused, it shows again."""
    if _writing(app, request):
        return {} if shown is None else {ui.panel.chat: shown}
    app.showcase.forget(session_key(request))
    r, empty = ui.results, {**charts.all_figures(), "chart-arena": charts.arena_figure()}
    return {ui.panel.chat: [], ui.messages: [], ui.turns: [], ui.exchanges: [], r.stats: stats.stats_html(None),
            r.race: "", ui.race_html: "", r.replay: gr.update(visible=False), r.arena_table: [],
            r.export: gr.update(value=None, visible=False), r.to_teach: gr.update(visible=False),
            **{plot: empty[elem_id] for elem_id, plot in r.plots.items()}, **chat_tree.cleared(ui.tree)}


def replay(ui, html_now: str):
    """The race again: a fresh nonce changes the HTML, so the browser restarts the animation."""
    if not html_now:
        return gr.skip()
    return html_now.replace('data-nonce="', f'data-nonce="{time.monotonic_ns()}-', 1)
