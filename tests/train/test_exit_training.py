"""`python -m specui.train exit` end to end at toy size on the bundled target: an early-exit head (fresh, with a gated
MLP) learns the target's greedy tokens from its cached exit states, checkpoints and resumes, saves a folder that
loads as a head and drafts exactly; a warm start grows an MLP on a saved head without changing what it drafts, or
moves its exit to another layer; the cached states are the full target's states entering the exit layer (not
normed by the final norm)."""

import json
import signal

import pytest
import torch

from specui import SpeculativeEngine
from specui.heads import early_exit
from specui.loading import load_pair
from specui.presets import load_config
from specui.train.exit_head import _reachable, build_head, exit_states, main, parse_args
from tests.helpers import BUNDLED_TARGET

pytestmark = pytest.mark.skipif(not BUNDLED_TARGET.exists(), reason="the bundled pair is not built")
PROMPTS = ["def main(argv=None):\n", "class Parser:\n    def ", "import os\n\nfor name in ", "    return self.",
           "if __name__ == '__main__':\n", "def read(path):\n    with open("]


@pytest.fixture(scope="module")
def pair():
    return load_pair(load_config().get("bundled"))


@pytest.fixture(scope="module")
def answers(pair, tmp_path_factory):
    """The bundled target's greedy answers to a few prompts, saved as `python -m specui.train.chat` writes them."""
    folder = tmp_path_factory.mktemp("answers")
    engine = pair.engine()
    records = []
    for text in PROMPTS:
        prompt = pair.tokenizer(text)["input_ids"]
        answer = engine.generate(prompt, max_new_tokens=30, speculative=False).token_ids
        records.append({"ids": torch.tensor(prompt + answer), "prompt_len": len(prompt)})
    torch.save(records, folder / "answers-00000.pt")
    return folder


def test_train_resume_save_load_and_draft(pair, answers, tmp_path, capsys):
    out = tmp_path / "exit"
    args = ["--preset", "bundled", "--answers", str(answers), "--out", str(out), "--exit-layer", "8",
            "--mlp-hidden", "32", "--vocab", "400", "--batch", "64", "--lr", "3e-3", "--threads", "1",
            "--eval-every", "10", "--checkpoint-every", "10", "--held-out", "0.34"]
    main([*args, "--steps", "20"])
    main([*args, "--steps", "30", "--resume"])
    log = capsys.readouterr().out
    assert "resumed from" in log and "at step 20" in log and "exit states read from" in log
    put = "under presets: bundled: put (beside any other heads it lists)"
    assert f"{put}\n    heads:\n      early_exit: {out}\n" in log
    meta = json.loads((out / "specui_head.json").read_text())
    assert meta["kind"] == "early_exit" and meta["steps"] == 30
    assert meta["arguments"]["exit_layer"] == 8 and meta["arguments"]["mlp_hidden"] == 32
    before, after = (float(x) for x in meta["held_out_agreement"].split(" (")[0].split(" -> "))
    assert 0 <= before <= 1 and 0 <= after <= 1

    head = early_exit.load(out, pair.target, meta)
    assert head.mlp is not None and len(head.output.token_ids) == 400
    engine = SpeculativeEngine(pair.target, heads={"early_exit": head})
    prompt = pair.tokenizer(PROMPTS[0])["input_ids"]
    plain = engine.generate(prompt, max_new_tokens=30, speculative=False).token_ids
    assert engine.generate(prompt, max_new_tokens=30, num_draft_tokens=2, drafter="early_exit").token_ids == plain


def test_a_warm_start_grows_an_mlp_that_starts_as_the_identity(pair, answers, tmp_path, capsys):
    first = tmp_path / "first"
    main(["--preset", "bundled", "--answers", str(answers), "--out", str(first), "--exit-layer", "8", "--vocab", "300",
          "--batch", "32", "--steps", "5", "--threads", "1"])
    saved = early_exit.load(first, pair.target, json.loads((first / "specui_head.json").read_text()))
    assert saved.mlp is None
    grown = build_head(parse_args(["--answers", str(answers), "--init", str(first), "--mlp-hidden", "16"]), pair.target, [])
    assert grown.mlp is not None and grown.exit_layer == 8 and torch.equal(grown.output.token_ids, saved.output.token_ids)
    states = torch.randn(5, pair.target.config.hidden_size)
    with torch.no_grad():
        torch.testing.assert_close(grown(states), saved(states))
    # --exit-layer moves a warm start's adapter to another exit, its weights and ids kept (here beside a new MLP)
    moved = build_head(parse_args(["--answers", str(answers), "--init", str(first), "--mlp-hidden", "16",
                                   "--exit-layer", "5"]), pair.target, [])
    assert moved.exit_layer == 5 and moved.feature_layers == (5,) and moved.arguments["exit_layer"] == 5
    assert moved.mlp is not None and torch.equal(moved.output.token_ids, saved.output.token_ids)
    with torch.no_grad():
        torch.testing.assert_close(moved(states), saved(states))
    with pytest.raises(SystemExit):
        parse_args(["--preset", "bundled"])
    assert "required: --answers" in capsys.readouterr().err


def test_the_cached_exit_states_are_the_states_entering_the_exit_layer(pair, answers, tmp_path):
    """The first E layers alone end on the model's final norm (transformers gives their last state after it); the
    cache must hold the state entering layer E of the whole target, as drafting sees it (`CachedLM.extend_early`)."""
    from specui.train.head_data import answer_sequences

    sequences, _ = answer_sequences(str(answers), max_len=64)
    target, seen = pair.target, []
    data = exit_states(target, sequences, layer=8, path=tmp_path / "states.pt", batch=4)
    whole = exit_states(target, sequences, layer=8, path=tmp_path / "whole.pt", batch=4, whole=True)  # every position
    assert len(target.model.layers) == 32 and not isinstance(target.model.norm, torch.nn.Identity)  # restored
    hook = target.model.layers[8].register_forward_pre_hook(lambda module, args, kwargs: seen.append(
        (args[0] if args else kwargs["hidden_states"])[0]), with_kwargs=True)
    try:
        for (ids, first), states, labels, every in zip(sequences, data["states"], data["labels"], whole["states"]):
            seen.clear()
            with torch.no_grad():
                target.model(input_ids=ids[None])
            torch.testing.assert_close(states.float(), seen[0][first - 1:len(ids) - 1].float(), atol=2e-2, rtol=1e-2)
            torch.testing.assert_close(every.float(), seen[0][:len(ids) - 1].float(), atol=2e-2, rtol=1e-2)
            assert torch.equal(labels, ids[first:])
    finally:
        hook.remove()


def test_the_training_positions_are_the_reachable_ones_of_the_picked_sequences():
    """`_reachable` copies the picked sequences' states at the positions the head can propose (label >= 0), in
    order, as a cat of them all and a mask would (without holding those copies at once)."""
    gen = torch.Generator().manual_seed(0)
    states = [torch.randn(n, 6, generator=gen).half() for n in (3, 5, 1, 4)]
    picked = [3, 0, 1]
    labels = torch.tensor([2, -1, 0, 1, 1, -1, 4, -1, 3, 3, -1, 0])  # 4 + 3 + 5 positions, in picked order
    x, y = _reachable(states, picked, labels)
    whole = torch.cat([states[i] for i in picked])
    assert torch.equal(x, whole[labels >= 0]) and torch.equal(y, labels[labels >= 0]) and x.dtype == torch.float16


@pytest.mark.slow
def test_ctrl_c_saves_the_step_in_hand_and_exits_130(answers, tmp_path, monkeypatch, capsys):
    from specui.train import exit_head
    from tests.train.test_heads_mistakes import signal_during_second_step

    out = tmp_path / "exit"
    calls = signal_during_second_step(monkeypatch, exit_head, signal.SIGINT, step_at=1)
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "bundled", "--answers", str(answers), "--out", str(out), "--exit-layer", "8", "--vocab",
              "300", "--batch", "8", "--steps", "50", "--threads", "1"])
    assert exit_.value.code == 130 and calls == [0, 1]  # the shell's status for Ctrl-C: a stop to resume
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == (f"interrupted at step 2: checkpoint saved in {out / 'checkpoint.pt'}; the same command with "
                    "--resume goes on from it")


def test_a_save_that_fails_leaves_the_earlier_head_in_out_whole(answers, tmp_path, monkeypatch):
    """The exit head is saved in --out itself (beside its checkpoint and states): a save over an earlier head that
    failed (a full disk) unlinked its specui_head.json and its weights first, so the earlier head was lost, where
    every other trainer's save leaves the earlier folder whole."""
    from tests.train.test_train_outputs import fill_the_disk_at_each_save

    out = tmp_path / "exit"
    args = ["--preset", "bundled", "--answers", str(answers), "--out", str(out), "--exit-layer", "8", "--vocab",
            "300", "--batch", "8", "--threads", "1"]
    main([*args, "--steps", "2"])
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "checkpoint.pt"}
    fill_the_disk_at_each_save(monkeypatch)
    with pytest.raises(OSError):
        main([*args, "--steps", "3", "--overwrite", "--seed", "7"])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "checkpoint.pt"} == before
