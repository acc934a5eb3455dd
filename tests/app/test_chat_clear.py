"""The chat's Clear (and its own 🗑): a new conversation, refused while a reply is being written or waits (its run
would write the old conversation back as it ends); the ended conversation's caches leave the pool at once, as a
closed tab's (`Showcase.forget`), and a run in flight keeps the cache it reads (`specui.ui.chat_handlers.clear`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specui.ui.chat_handlers import clear, respond, waiting
from tests.app import test_chat_turns as turns
from tests.app.test_chat_turns import CODE, form, states

pytestmark = pytest.mark.slow  # runs a real pair
tab = turns.tab  # the chat tab and a fresh app on the bundled pair (this module's own, as the fixture is per module)


def test_clear_starts_a_new_conversation_unless_a_reply_is_being_written(tab):
    ui, app = tab
    *_, ok = respond(app, ui, form(ui, CODE))
    request = SimpleNamespace(session_hash="clearing")
    waiting(app, ui, form(ui, "x = 1", state=states(ui, ok)), request)
    assert clear(app, ui, request) == {}  # its run would write the old conversation back when it ends
    shown = ok[ui.messages]  # the chat's own 🗑 emptied the page's chat: refused, the conversation shows again
    assert clear(app, ui, request, shown=shown) == {ui.panel.chat: shown}
    app.stops.set("clearing")
    emptied = clear(app, ui, request)
    assert emptied[ui.messages] == emptied[ui.turns] == emptied[ui.exchanges] == emptied[ui.panel.chat] == []
    assert emptied[ui.results.export]["visible"] is False


def test_clear_lets_the_conversations_caches_go_and_leaves_other_tabs_caches(tab):
    """Clear frees the memory of the conversation it ends (its target cache), as a closed tab does; another tab's
    conversation keeps its own."""
    ui, app = tab
    mine, other = SimpleNamespace(session_hash="clearing-frees"), SimpleNamespace(session_hash="clearing-stays")
    for request in (mine, other):
        list(respond(app, ui, form(ui, CODE), request))
    pool = app.showcase.cache.get(app.showcase.config.get("bundled")).conversations
    held = {owner: [c for c in pool.caches if c.owner == owner] for owner in ("clearing-frees", "clearing-stays")}
    assert all(caches and all(c.nbytes for c in caches) for caches in held.values())
    clear(app, ui, mine)
    assert not any(c.owner == "clearing-frees" for c in pool.caches)
    assert all(c.nbytes == 0 for c in held["clearing-frees"]) and all(c.nbytes for c in held["clearing-stays"])


def test_clear_while_a_reply_streams_leaves_the_cache_it_reads_and_its_tokens(tab):
    """Clear pressed while a later turn's reply streams (its run holding the conversation's cache) is refused before
    anything is let go: the cache stays in the pool, holding its memory, the reply is plain decoding's, and the next
    turn reads from it. A Clear that let the cache go first would cost every later turn its whole prompt again."""
    ui, app = tab
    request = SimpleNamespace(session_hash="clearing-mid-run")
    data = {**form(ui, CODE), ui.controls.max_new: 24}
    waiting(app, ui, data, request)
    *_, first = respond(app, ui, data, request)
    pair = app.showcase.cache.get(app.showcase.config.get("bundled"))
    data = {**form(ui, "x = 1\n", state=states(ui, first)), ui.controls.max_new: 40}
    waiting(app, ui, data, request)
    frames, held = respond(app, ui, data, request), []
    for frame in frames:  # the reply streams: its run holds the cache
        if held := [c for c in pair.conversations.caches if c.owner == "clearing-mid-run" and c.busy]:
            break
    assert held, "no frame came while the run held its cache"
    with pytest.warns(UserWarning, match="press Stop first"):
        assert clear(app, ui, request) == {}
    assert held[0] in pair.conversations.caches and held[0].busy and held[0].nbytes
    *_, last = [frame, *frames]
    ids = app.showcase.encode(pair, "x = 1\n", first[ui.turns], "")
    plain = pair.engine().generate(ids, max_new_tokens=40, speculative=False)
    assert last[ui.turns][-1]["content"] == pair.tokenizer.decode(plain.token_ids, skip_special_tokens=True)
    assert held[0] in pair.conversations.caches and not held[0].busy and held[0].length > len(ids) // 2
