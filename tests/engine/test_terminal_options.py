"""`python -m specui`'s settings that the app's Chat tab and its API's /generate have: --adaptive, --draft-confidence,
--tree-width, --tree-nodes and --repetition-penalty. Each reaches the engine (the run's --json record holds it), each
out-of-range value is refused in one line naming its flag with exit status 2 before torch loads, at the API's limits
(the older --temperature, --top-k and --seed too: they took any the library takes, `--temperature 50`), and greedy
--compare stays identical with token trees, adaptive K and the confidence stop on tiny models."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specui.engine import SpeculativeEngine
from specui.settings import MAX_SEED
from specui.terminal import main
from specui.terminal_view import Reply, record, stats_line
from tests.helpers import ROOT, make_model, noisy_copy, save_tiny_model

# every argv read by the terminal's parse_args in one process: its exit status and message each, then the heavy
# modules imported by then (none: the refusals came before torch and transformers)
PROBE = """import contextlib, io, json, sys
from specui.terminal import parse_args
said = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            parse_args(argv)
        said.append([0, err.getvalue()])
    except SystemExit as e:
        said.append([e.code, err.getvalue()])
print(json.dumps([said, sorted({'torch', 'transformers', 'gradio'} & set(sys.modules))]))"""

REFUSED = [
    (["--repetition-penalty", "0"], "--repetition-penalty must be a number above 0 and up to 10 (1 = off), got 0"),
    (["--repetition-penalty", "10.5"], "--repetition-penalty must be a number above 0 and up to 10 (1 = off), got "
                                       "10.5"),
    (["--draft-confidence", "0.99"], "--draft-confidence must be a number from 0 (always K drafts) to 0.95, got 0.99"),
    (["--draft-confidence", "-0.1"], "--draft-confidence must be a number from 0 (always K drafts) to 0.95"),
    (["--tree-width", "9"], "--tree-width must be an integer from 1 (no tree) to 8, got 9"),
    (["--tree-width", "2", "--tree-nodes", "257"], "--tree-nodes must be an integer from 0 (the static tree) to 256"),
    (["--tree-nodes", "5"], "--tree-nodes 5 needs a tree: set --tree-width to 2 or more"),
    (["--adaptive", "--tree-width", "2"], "--adaptive and token trees (--tree-width above 1) do not go together"),
    (["--drafter", "prompt lookup", "--tree-width", "2"], "--drafter 'prompt_lookup' cannot draft trees"),
    (["--tree-width", "2", "-k", "8"], "a static tree of width 2 and depth K=8 has 510 nodes, more than 256; lower "
                                       "them or set --tree-nodes"),
    (["--temperature", "50"], "--temperature must be a number from 0 (greedy) to 5, got 50"),
    (["--temperature", "nan"], "--temperature must be a number from 0 (greedy) to 5, got nan"),
    (["--temperature", "1", "--top-k", str(10**7)], "--top-k must be an integer from 0 (off) to 1,000,000, got 1000"),
    (["--temperature", "1", "--seed", str(MAX_SEED + 1)], "--seed must be an integer from 0 to 9,223,372,036,854,"),
]
ACCEPTED = [["--temperature", "5", "--top-k", "1000000", "--seed", str(MAX_SEED)], ["--draft-confidence", "0.95"]]


def test_out_of_range_values_are_one_line_naming_the_flag_before_torch_loads():
    """At the API's limits (the app's confidence slider ends at 0.95: specui.settings.MAX_CONFIDENCE, which both
    read); --help names every new flag."""
    argvs = [["--help"], *([*argv, "x"] for argv, _ in REFUSED), *([*argv, "x"] for argv in ACCEPTED)]
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    said, heavy = json.loads(out.stdout)
    assert heavy == []
    (status, help_text), *refusals = said[:len(said) - len(ACCEPTED)]
    assert all(answer == [0, ""] for answer in said[len(said) - len(ACCEPTED):]), said  # the limits themselves taken
    assert status == 0 and all(flag in help_text for flag in ("--adaptive", "--draft-confidence C", "--tree-width W",
                                                              "--tree-nodes N", "--repetition-penalty P"))
    for (argv, expected), (status, err) in zip(REFUSED, refusals, strict=True):
        assert status == 2 and err.count("\n") == 1, (argv, err)
        assert err.startswith("python -m specui: error: ") and expected in err, (argv, err)


def test_a_static_tree_too_big_at_the_presets_k_is_refused_before_its_models_load(capsys):
    """The bundled preset's K is 7: a static tree of width 3 holds 3,279 nodes, said before any model loads."""
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "bundled", "--tree-width", "3", "x"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Loading" not in err, err
    assert err.strip() == ("python -m specui: error: a static tree of width 3 and depth K=7 has 3,279 nodes, more "
                           "than 256; lower them or set --tree-nodes (the dynamic tree keeps the best N)")


RUNS = {  # the flags, and what the run's record must hold of them
    "dynamic tree": (["--tree-width", "2", "--tree-nodes", "8"], {"tree_width": 2, "tree_nodes": 8}),
    "static tree": (["--tree-width", "2", "-k", "2", "--draft-confidence", "0.5"],
                    {"tree_width": 2, "tree_nodes": 0, "num_draft_tokens": 2, "draft_confidence": 0.5}),
    "adaptive, confidence stop": (["--adaptive", "--draft-confidence", "0.5"],
                                  {"adaptive": True, "draft_confidence": 0.5}),
    "repetition penalty": (["--repetition-penalty", "1.5"], {"repetition_penalty": 1.5}),
}


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    """A models.yaml of one preset: a tiny random target and a noisy copy of it as the draft model (char-level),
    loaded in milliseconds where the bundled pair takes seconds a run."""
    root = tmp_path_factory.mktemp("tiny")
    target = make_model("llama", layers=2, seed=0)
    save_tiny_model(root / "target", "llama", layers=2, seed=0, model=target)
    save_tiny_model(root / "draft", "llama", layers=2, seed=1, model=noisy_copy(target, noise=0.1, seed=1))
    (root / "models.yaml").write_text("default: tiny\npresets:\n  tiny:\n    target: ./target\n    draft: ./draft\n"
                                      "    drafter: model\n    num_draft_tokens: 3\n    dtype: float32\n"
                                      "    device: cpu\n  alone:\n    target: ./target\n    device: cpu\n"
                                      "  confident:\n    target: ./target\n    draft: ./draft\n"
                                      "    draft_confidence: {model: 0.5}\n    device: cpu\n")
    return root / "models.yaml"


def test_a_tree_takes_no_presets_confidence_floor_unless_given_as_load_engine_and_the_benchmark(tiny_config):
    """A preset's draft_confidence is its chains' stop; a tree left without --draft-confidence gets no floor
    (`Preset.confidence_for(tree=True)`, docs/engine.md), where it took the chain's and pruned its nodes."""
    from specui.presets import load_config
    from specui.terminal import parse_args, settings_for

    preset = load_config(tiny_config).get("confident")
    confidence = {flags: settings_for(parse_args([*flags, "x"]), None, preset).draft_confidence
                  for flags in [(), ("--tree-width", "2", "--tree-nodes", "6"),
                                ("--tree-width", "2", "--tree-nodes", "6", "--draft-confidence", "0.2")]}
    assert list(confidence.values()) == [0.5, 0.0, 0.2], confidence


def test_a_tree_with_a_presets_drafter_that_drafts_none_is_refused_before_its_models_load(tiny_config, capsys):
    """No --drafter: the preset's own (a target alone drafts by prompt lookup) is checked before anything loads."""
    with pytest.raises(SystemExit) as exit_:
        main(["--config", str(tiny_config), "--preset", "alone", "--tree-width", "2", "--tree-nodes", "4", "x"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "Loading" not in err, err
    assert err.startswith("python -m specui: error: --drafter 'prompt_lookup' cannot draft trees"), err


def test_each_flag_reaches_the_engine_and_greedy_compare_stays_identical(tiny_config, tmp_path, capsys):
    """In this process: each run's record holds its flags, and --compare finds the plain run identical. Greedy, the
    tree, adaptive and confidence-stop runs all write plain greedy's text; the repetition penalty changes the text (it
    reached the target's logits), stays identical to plain decoding's with the same penalty, and the stats line says
    it. A static tree keeps its shape whatever the confidence stop: its stats line claims no stop."""
    texts = {}
    for name, (flags, recorded) in RUNS.items():
        path = tmp_path / f"{len(texts)}.json"
        main(["--config", str(tiny_config), "--max-new-tokens", "24", "--compare", "--json", str(path), *flags,
              "def fibonacci(n):"])
        err = capsys.readouterr().err
        data = json.loads(path.read_text())
        assert {k: data["settings"][k] for k in recorded} == recorded, (name, data["settings"])
        assert data["identical"] is True and "identical: yes, token for token" in err, (name, err)
        assert data["stats"]["mean_accepted_length"] > 1, (name, err)  # drafts were accepted: rounds kept paths
        assert ("acceptance along the path" in err) == ("tree" in name), (name, err)
        assert ("fewer while the draft is less sure" in err) == (name == "adaptive, confidence stop"), (name, err)
        assert ("repetition penalty 1.5" in err) == (name == "repetition penalty"), (name, err)
        texts[name] = data["text"]
    assert "token trees of up to 8 nodes" not in err  # the last run drafted chains
    penalised = texts.pop("repetition penalty")
    assert len(set(texts.values())) == 1 and penalised not in texts.values(), texts


def test_an_adaptive_runs_stats_take_its_own_k_as_the_apps_do():
    """The record's Theorem 3.8 was taken at the K asked for even where adaptive K moved it; the app's stats take the
    K most rounds asked for (`run_stats(k=None)`). The stats line says K was adaptive, and a tree's largest size."""
    from specui import runstats
    from specui.settings import DecodeSettings

    target = make_model("llama", layers=2, seed=0)
    engine = SpeculativeEngine(target, noisy_copy(target, noise=0.3, seed=1))
    prompt = [5, 6, 7, 8, 5, 6, 7, 9, 5, 6]
    settings = DecodeSettings(max_new_tokens=32, num_draft_tokens=2, adaptive=True)
    result = engine.generate(prompt, settings)
    assert {r.num_draft_tokens for r in result.rounds} - {2}  # K moved
    data = record(Reply(result=result, pieces=[""] * len(result.token_ids)), None, preset="tiny", settings=settings,
                  prompt="x", system="", command="")
    assert data["stats"]["theory"] == runstats.run_stats(result).as_dict()["theory"] != \
        runstats.run_stats(result, k=2).as_dict()["theory"]
    assert "drafter draft model, K adaptive from 2 · " in stats_line(Reply(result=result), drafter="model", k=2,
                                                                    confidence=0.0, sampled=False, adaptive=True)
    tree = engine.generate(prompt, max_new_tokens=8, num_draft_tokens=3, tree_width=2, tree_nodes=5)
    assert "K 3, token trees of up to 5 nodes · " in stats_line(Reply(result=tree), drafter="model", k=3,
                                                               confidence=0.0, sampled=False)
