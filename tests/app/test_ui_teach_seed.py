"""The Teach tab's Seed box and labels, through its handlers without a server or a browser (over a tiny real pair):
-1 draws a fresh seed for the run, as the Chat tab's does, which the status line shows and which replays the run; a
given seed stays as it is; a greedy run reads none. The controls the two tabs share are labelled alike, and the
Teach tab's refusals name its controls by those words."""

from __future__ import annotations

import gradio as gr
import pytest

from specui.ui.toasts import Refusal


@pytest.fixture(scope="module")
def tabs(tmp_path_factory):
    """The Chat tab's layout and the Teach tab over a tiny real pair in one Blocks, the Teach handlers' state and
    the Teach controls' values of a page as it opens."""
    from specui.ui.blocks import chat_tab
    from specui.ui.teaching import TeachState, teaching_tab
    from tests.app.teach_page import PROMPT, tiny_showcase

    showcase = tiny_showcase(tmp_path_factory.mktemp("teach-seed-pair"))
    with gr.Blocks() as demo, gr.Tabs():
        chat = chat_tab(showcase.config)
        teach = teaching_tab(showcase)
    c = teach.controls
    page = {component: component.value for component in (c.preset, c.drafter, c.k, c.confidence, c.temperature,
                                                          c.penalty, c.max_new, c.seed)}
    page |= {c.prompt: PROMPT, teach.compare.second: "none", c.context: None, teach.handed: 0}
    return demo, chat, teach, TeachState(showcase), page


def _decoded(tabs, **settings) -> tuple:
    """Decode with `settings` (by control name) as the Teach tab's Decode does: (the run, its status line)."""
    from specui.ui.teach_keys import Shown
    from specui.ui.teaching import decode

    _, _, teach, state, page = tabs
    c = teach.controls
    out = decode(state, teach, {**page, **{getattr(c, name): value for name, value in settings.items()},
                                teach.index: Shown(), teach.memory: {}})
    return out[teach.run], out[teach.step.status]


def _rounds(run) -> list:
    """What a run's rounds show: each round's drafts, u draws and tokens kept."""
    return [(s.index, [(d.token_id, d.u, d.verdict) for d in s.drafts], [e.token_id for e in s.emitted])
            for s in run.steps]


def test_minus_one_draws_a_fresh_seed_that_is_shown_and_replays_the_run(tabs):
    """-1 decoded with seed 0 without a word (teach_prepare made None 0): a teacher who typed it for "random" got
    the same rounds every time. Now each Decode draws its own seed, the status line says which, and that seed typed
    in the box gives the very rounds again, the plain run beside them taken with it too."""
    sampled = {"k": 3, "temperature": 0.9, "max_new": 16}
    first, said = _decoded(tabs, seed=-1, **sampled)
    second, said_again = _decoded(tabs, seed=-1, **sampled)
    assert first.spec.seed != second.spec.seed
    assert f"(seed {first.spec.seed})" in said and f"(seed {second.spec.seed})" in said_again
    assert first.plain.seed == first.spec.seed
    replayed, said_replayed = _decoded(tabs, seed=first.spec.seed, **sampled)
    assert replayed.spec.seed == first.spec.seed and f"(seed {first.spec.seed})" in said_replayed
    assert replayed.spec.token_ids == first.spec.token_ids and _rounds(replayed) == _rounds(first)
    kept, said_kept = _decoded(tabs, seed=5, **sampled)  # a given seed stays as it is
    assert kept.spec.seed == 5 and "(seed 5)" in said_kept


def test_a_greedy_run_reads_no_seed(tabs):
    """At temperature 0 the rounds are the same whatever the seed, and the status line shows none to replay."""
    greedy = {"k": 3, "temperature": 0.0, "max_new": 12}
    drawn, said = _decoded(tabs, seed=-1, **greedy)
    given, _ = _decoded(tabs, seed=5, **greedy)
    assert drawn.spec.token_ids == given.spec.token_ids and _rounds(drawn) == _rounds(given)
    assert "(greedy: the seed plays no part)" in said and "(seed" not in said


def test_the_two_tabs_label_the_same_controls_alike(tabs):
    """'Preset (models.yaml)' / 'Preset', 'Max new tokens' / 'New tokens', 'Seed (-1 = random)' / 'Seed': the same
    control had two names. Each Teach control whose element id is a Chat control's with "teach-" before it, and
    each one of the same field name, carries the Chat control's label."""
    from dataclasses import fields

    demo, chat, teach, _, _ = tabs
    ids = {block.elem_id: block for block in demo.blocks.values() if getattr(block, "elem_id", None)}
    pairs = {(ids[name], ids[name.removeprefix("teach-")]) for name in ids
             if name.startswith("teach-") and name.removeprefix("teach-") in ids}
    assert {block.elem_id for block, _ in pairs} >= {"teach-preset", "teach-max-new-tokens", "teach-seed"}
    pairs |= {(getattr(teach.controls, f.name), getattr(chat.controls, f.name)) for f in fields(teach.controls)
              if hasattr(chat.controls, f.name) and getattr(getattr(chat.controls, f.name), "label", None)}
    assert {teach_control.label: chat_control.label for teach_control, chat_control in pairs} == {
        chat_control.label: chat_control.label for _, chat_control in pairs}


def test_both_tabs_seed_boxes_open_on_the_seed_chat_generate_and_a_lesson_default_to(tabs):
    """The Teach tab's Seed box opened on 1, the Chat tab's on 0 (as /generate's and a lesson's runs): the same
    message with the same settings decoded other tokens in the two tabs. Both open on 0 now."""
    import inspect

    from specui import lesson
    from specui.ui import api

    _, chat, teach, state, _ = tabs
    generate = inspect.signature(api.generate_endpoint(state.showcase)).parameters["seed"].default
    assert teach.controls.seed.value == chat.controls.seed.value == generate == lesson.DEFAULTS.seed == 0


@pytest.mark.parametrize(("name", "value"), [("seed", 1.5), ("seed", -2), ("max_new", 0)])
def test_a_refusal_names_the_teach_control_as_its_label_does(tabs, name, value):
    """A setting the Teach tab refuses is named by the words on its control (its label up to the parenthesis)."""
    from specui.ui import teach_work

    _, _, teach, state, page = tabs
    c = teach.controls
    with pytest.raises(Refusal) as refused:
        state.prepare({**teach_work.values(c, page), name: value})
    words = getattr(c, name).label.split(" (")[0]
    assert refused.value.text.lower().startswith(f"{words.lower()} must be")


def test_the_noisy_draft_of_the_drafter_comparison_is_drawn_with_each_runs_seed(tabs):
    """The 'draft + noise' contestant was kept by (preset, noise): a later run at another seed (-1 draws one each time)
    raced the first seed's noisy draft. Now it is the one its own seed draws."""
    import torch

    from specui import lesson
    from specui.ui import teach_experiments, teach_work

    _, _, teach, state, page = tabs
    values = {**teach_work.values(teach.controls, page), "temperature": 0.9, "max_new": 8}
    for seed in (1, 2):
        list(teach_experiments.drafter_points(state, {**values, "seed": seed}, 3.0))
    [weak] = state.weak_drafts.values()
    drawn = lesson.weakened_draft(state.prepare(values)[0].pair.draft, noise=3.0, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(weak.parameters(), drawn.parameters(), strict=True))


def _experiment(tabs, name: str, **settings) -> str:
    """The last table that the experiment `name` (a `TeachTab` field: sweep, temps, drafters, budget) drew, run with
    `settings` (by control name) as its button runs it."""
    from specui.ui import teach_experiments

    _, _, teach, state, page = tabs
    c, experiment = teach.controls, getattr(teach, name)
    handler, extra = next((h, e) for x, h, e in teach_experiments.handlers(teach) if x is experiment)
    data = {**page, **{getattr(c, key): value for key, value in settings.items()},
            **{control: control.value for control in extra}}
    return list(handler(state, teach, data))[-1][experiment.table]


@pytest.mark.parametrize("name", ["sweep", "temps", "drafters", "budget"])
def test_each_experiment_names_the_seed_its_runs_drew_which_runs_it_again(tabs, name):
    """An experiment run with -1 drew a seed that no table named: a teacher could not run it again. Each table now
    names it (the stepper's words, request.seed_words), and that seed typed in Seed gives the same runs: the same
    tokens a round and acceptance (the timings differ)."""
    import re

    sampled = {"k": 3, "temperature": 0.9, "max_new": 8}
    table = _experiment(tabs, name, seed=-1, **sampled)
    seed = int(re.search(r"Seed (\d+): type it in the Seed box to run this again\.", table).group(1))
    assert seed < 10**9
    if name in ("sweep", "drafters"):  # their rows: label, α, acceptance rate, tokens a round, then timings

        def same(html):
            return [row.split('<td class="num">')[1:4] for row in html.split('<tr class="teach-point">')[1:]]

        assert same(_experiment(tabs, name, seed=seed, **sampled)) == same(table)


def test_a_greedy_experiment_says_the_seed_plays_no_part_but_noise_and_sampled_points_name_it(tabs):
    """At temperature 0 the K sweep reads no seed, and its table says so; the temperature sweep's points above 0 and
    the drafter comparison's noisy draft draw with it whatever the box's temperature, and theirs name it."""
    greedy = {"k": 3, "temperature": 0.0, "max_new": 8}
    assert "Greedy: the seed plays no part." in _experiment(tabs, "sweep", seed=-1, **greedy)
    for name in ("temps", "drafters"):
        assert "Seed 7: type it in the Seed box to run this again." in _experiment(tabs, name, seed=7, **greedy)


def test_the_seed_line_reads_off_a_projector_as_the_table_does():
    """The seed line under an experiment's table had the chart keys' class (.teach-key: 12 px at 70% opacity), the
    faintest text of the tab, where a class reads the seed off a projector to type it back; and it said "type it in
    Seed". It now reads at the page's text size, none of its classes shrunk or faded by style.css, and names the box."""
    import re
    from pathlib import Path

    from specui.ui.teach_view import seed_note

    note = seed_note("seed 482913377")
    assert "Seed 482913377: type it in the Seed box to run this again." in note
    css = (Path(__file__).parents[2] / "specui/ui/style.css").read_text()
    classes = re.search(r'class="([^"]*)"', note).group(1).split()
    faint = [c for c in classes if re.search(rf"\.{c}\b[^{{}}]*\{{[^}}]*(opacity|font-size:\s*1[0-3]px)", css)]
    assert not faint, faint
    assert seed_note("greedy: the seed plays no part") == '<p class="teach-seed">Greedy: the seed plays no part.</p>'
