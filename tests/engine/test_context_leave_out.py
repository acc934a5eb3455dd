"""A conversation past the context window with a budget too large to leave a quarter of the window free
(`specui.prompt_cache.leave_out_oldest`): the newest exchanges that fit at all are kept, not none."""

from __future__ import annotations

from specui.prompt_cache import leave_out_oldest


def conversation(sizes):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "", "size": size}
            for i, size in enumerate(sizes)]


def ids_of(kept):  # 10 ids for the system message and the new message, then each message's size
    return [0] * (10 + sum(m["size"] for m in kept))


def test_a_budget_that_leaves_no_quarter_free_keeps_the_newest_exchanges_that_fit():
    history = conversation([30, 20, 10, 5, 15, 10])  # 100 ids with the new message; the newest exchange 35
    # room for 120 - 30 - 85 = 5 ids: no exchange leaves a quarter free, and the newest one fits the window exactly
    ids, n = leave_out_oldest(history, ids_of, limit=120, new_tokens=85)
    assert n == 4 and len(ids) == 35 and len(ids) + 85 <= 120
    ids, n = leave_out_oldest(history, ids_of, limit=119, new_tokens=85)  # one less: the new message alone
    assert n == 6 and len(ids) == 10
    ids, n = leave_out_oldest(history, ids_of, limit=90, new_tokens=85)  # not even that: the engine will say so
    assert n == 6 and len(ids) == 10
