"""The Teach tab on a ZeroGPU Space, where a GPU exists only inside a `@spaces.GPU` call: every action that runs a
model does all its model work inside one such call, whose arguments and results ZeroGPU pickles.

ZeroGPU cannot run here (no device API, no GPU), so `spaces.GPU` is stood in for by a decorator that does what it
does to a call and nothing more: it pickles the arguments and every value the call yields (a round trip), and it
records the call. Torch work outside such a call (which on ZeroGPU finds no GPU) is caught by a torch function mode
that counts every torch call made outside one. Everything else is real: the app's own Blocks, its handlers, the
bundled pair.
"""

import copy
import pickle

import gradio as gr
import pytest
from torch.overrides import TorchFunctionMode

from tests.helpers import ui_config

PROMPT = "def main(argv):\n    "


class Outside(TorchFunctionMode):
    """Counts the torch calls made while no stood-in GPU call runs (`inside`)."""

    def __init__(self):
        super().__init__()
        self.inside, self.calls = 0, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not self.inside:
            self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class StandIn:
    """`specui.spaces.gpu` as ZeroGPU's: each call's arguments, yielded values and gr.Error go through pickle (as
    spaces/zero/wrappers.py sends them between the server and its worker); calls recorded."""

    def __init__(self, mode: Outside):
        self.mode, self.calls, self.sizes = mode, [], []

    def gpu(self, *, duration: int):
        def decorate(fn):
            def call(*args):
                sent = pickle.dumps(args)
                self.sizes.append(len(sent))
                self.calls.append(getattr(args[0], "__name__", fn.__name__))
                work = fn(*pickle.loads(sent))
                while True:
                    self.mode.inside += 1
                    try:
                        value = next(work)
                    except StopIteration:
                        return
                    except gr.Error as e:  # sent back pickled (other errors become its "ZeroGPU worker error")
                        raise pickle.loads(pickle.dumps(e)) from None
                    finally:
                        self.mode.inside -= 1
                    yield pickle.loads(pickle.dumps(value))
            return call
        return decorate


@pytest.fixture(scope="module")
def app():
    from specui.ui import blocks, gpu_calls

    mode = Outside()
    stand_in = StandIn(mode)
    patch = pytest.MonkeyPatch()
    patch.setattr(gpu_calls, "gpu", stand_in.gpu)
    try:
        demo = blocks.build(ui_config(), preload=False)
    finally:
        patch.undo()
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    return demo, by_id, stand_in


def event(demo, by_id, elem_id, name):
    prompt = by_id["teach-prompt"]
    return next(f for f in demo.fns.values() if (by_id[elem_id]._id, name) in f.targets
                and (prompt in f.inputs or elem_id == "teach-second"))


def form(fn, by_id, **values):
    data = {c: copy.deepcopy(c.value) for c in fn.inputs}
    data[by_id["teach-prompt"]], data[by_id["teach-max-new-tokens"]], data[by_id["teach-k"]] = PROMPT, 8, 3
    return data | {by_id[name]: value for name, value in values.items()}


def answer(fn, data):
    out = fn.fn(data)
    return list(out)[-1] if not isinstance(out, dict) else out  # an experiment yields, the rest return


@pytest.mark.slow  # loads the bundled pair and runs every Teach action
@pytest.mark.parametrize("elem_id, name, task", [
    ("step-start", "click", "decoded"), ("step-first", "click", "decoded"),
    ("tree-step-start", "click", "decoded"),
    ("sweep-run", "click", "k_sweep_points"), ("temp-run", "click", "temperature_points"),
    ("drafters-run", "click", "drafter_points"), ("verify-cost-run", "click", "verify_cost_curve"),
    ("budget-run", "click", "time_budget_split")])
def test_each_teach_action_runs_its_model_in_one_zero_gpu_call(app, elem_id, name, task):
    """Decode, Next before any run, Decode with a tree and the five experiments ran the engine in the server's
    process, with no allocation: on a ZeroGPU Space each failed. Now each is one call, of plain data both ways."""
    demo, by_id, stand_in = app
    fn = event(demo, by_id, elem_id, name)
    before = len(stand_in.calls)
    with stand_in.mode:
        out = answer(fn, form(fn, by_id, **({"tree-step-width": 2} if elem_id == "tree-step-start" else {})))
    assert stand_in.calls[before:] == [task]
    assert not stand_in.mode.calls, f"torch work outside the GPU call: {stand_in.mode.calls[:5]}"
    assert max(stand_in.sizes[before:]) < 20_000  # controls' values, not models
    text = " ".join(v for v in out.values() if isinstance(v, str))
    assert "Not decoded" not in text and "Not run" not in text and "⚠" not in text, text[:300]


@pytest.mark.slow  # loads the bundled pair
def test_the_second_drafter_runs_in_one_zero_gpu_call_without_the_runs_rounds(app):
    """The second drafter's dropdown compared in the server's process; now in one call, which takes the run on show
    without its rounds (what the comparison reads: its preset, prompt ids and settings)."""
    from specui import lesson_compare
    from specui.lesson import TeachingRun
    from specui.ui.teach_keys import Shown

    demo, by_id, stand_in = app
    fn = event(demo, by_id, "step-start", "click")
    run = next(v for v in answer(fn, form(fn, by_id)).values() if isinstance(v, TeachingRun))
    second = event(demo, by_id, "teach-second", "change")
    data = {c: copy.deepcopy(c.value) for c in second.inputs}
    run_state = next(c for c in second.inputs if isinstance(c.value, type(None)) and c is not by_id["teach-second"]
                     and c.__class__.__name__ == "State")
    index = next(c for c in second.inputs if isinstance(c.value, Shown))
    data |= {run_state: run, index: Shown(run), by_id["teach-second"]: "prompt lookup"}
    before = len(stand_in.calls)
    with stand_in.mode:
        second.fn(data)
    assert stand_in.calls[before:] == ["compared_with"] and not stand_in.mode.calls
    assert stand_in.sizes[-1] < len(pickle.dumps(run))
    compared = data[index].beside  # kept beside the rounds
    assert isinstance(compared, lesson_compare.Comparison) and len(compared.rounds) == len(run.steps)


@pytest.mark.slow  # builds the app
def test_a_refusal_made_inside_the_call_comes_back_as_the_same_calm_line(app):
    """A refusal (here an empty prompt) raised inside the call travels back pickled, as ZeroGPU sends a gr.Error,
    and is told in the status line as before, not as ZeroGPU's "worker error"."""
    demo, by_id, stand_in = app
    fn = event(demo, by_id, "step-start", "click")
    with pytest.warns(UserWarning, match="Type a prompt first"):
        out = fn.fn(form(fn, by_id, **{"teach-prompt": "  "}))
    assert out == {by_id["step-status"]: "⚠ Not decoded: Type a prompt first."}
    from specui.ui.toasts import Refusal

    again = pickle.loads(pickle.dumps(Refusal("a <b> prompt")))
    assert isinstance(again, Refusal) and again.text == "a <b> prompt"


@pytest.mark.slow  # builds the app
def test_a_second_drafter_picked_before_any_run_takes_no_zero_gpu_call(app):
    """Before any Decode there is nothing to compare: the dropdown's answer needs no model, and asked for a ZeroGPU
    allocation (a visitor's GPU quota, a wait in the Space's queue) all the same."""
    from specui.ui.teach_keys import Shown

    demo, by_id, stand_in = app
    second = event(demo, by_id, "teach-second", "change")
    data = {c: copy.deepcopy(c.value) for c in second.inputs} | {by_id["teach-second"]: "prompt lookup"}
    assert any(isinstance(v, Shown) for v in data.values())
    before = len(stand_in.calls)
    out = second.fn(data)
    assert stand_in.calls[before:] == []
    from specui.ui.teach_compare_view import render_compare, waiting

    # the view says what the chosen drafter waits for (78fe9de), with no model run
    assert out[by_id["compare-view"]] == render_compare(None, 0, note=waiting("prompt lookup", decoded=False))
