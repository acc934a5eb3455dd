"""Model cards (README.md) for the bundled pair (corpus, shapes, training command, held-out figures) and
for the chat draft of `specui.train.chat` (from its specui_draft.json).

The training facts are kept next to the weights in `specui_training.json`, so `--eval-only` can
rewrite the cards with fresh figures without losing how the pair was trained.
"""

import json
import platform
from dataclasses import asdict, replace
from pathlib import Path

import torch

from specui.chat_draft import META
from specui.text import fmt
from specui.train.config import TrainConfig

TRAINING_FILE = "specui_training.json"


def training_command(cfg) -> str:
    """The command line that rebuilds the pair with `cfg` (only the options that differ)."""
    defaults = asdict(TrainConfig())
    local = {"out", "checkpoint_dir", "checkpoint_every"}  # where files go, not what is trained
    args = []
    for k, v in asdict(cfg).items():
        if defaults[k] != v and k not in local:
            flag = f"--{k.replace('_', '-')}"
            args.append((flag if v else f"--no-{flag[2:]}") if isinstance(v, bool) else f"{flag} {v}")
    return " ".join(["python -m specui.train", *args])


def save_training_facts(folder: Path, *, cfg, train_minutes: float, device: str) -> None:
    facts = {
        "command": training_command(cfg),
        "config": asdict(cfg),
        "train_minutes": round(train_minutes, 1),
        "device": device if device != "cpu" else f"cpu ({cfg.threads} thread{'s' if cfg.threads != 1 else ''})",
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    (folder / TRAINING_FILE).write_text(json.dumps(facts, indent=2) + "\n")


def refresh_training_command(folder: Path, *, cfg, kept=()) -> TrainConfig:
    """After retraining only the draft: the target's facts name the command that rebuilds the pair, the target's own
    settings `kept` (those --stage draft refuses) as its facts recorded them. Returns that configuration."""
    facts = load_training_facts(folder)
    cfg = replace(cfg, **{k: v for k, v in facts.get("config", {}).items() if k in kept})
    facts.update(command=training_command(cfg), config=asdict(cfg))
    (folder / TRAINING_FILE).write_text(json.dumps(facts, indent=2) + "\n")
    return cfg


def load_training_facts(folder: Path) -> dict:
    path = folder / TRAINING_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def shape_line(config: dict) -> str:
    return (f"LlamaForCausalLM, {config['num_hidden_layers']} decoder layer(s), width {config['hidden_size']}, "
            f"{config['num_attention_heads']} heads, MLP {config['intermediate_size']}, "
            f"vocabulary {config['vocab_size']}, context {config['max_position_embeddings']}, tied embeddings")


def figures(report: dict) -> str:
    lines = [
        f"- held-out sample: {report['eval_files']} files of the stdlib's test folders, "
        f"{fmt(report['eval_bytes'], ',')} bytes",
        f"- target bits per byte: **{fmt(report['target_bpb'], '.3f')}** "
        f"(draft alone: {fmt(report['draft_bpb'], '.3f')})",
        f"- greedy acceptance alpha (draft argmax = target's greedy token, {report['alpha_prompts']} prompts "
        f"of 256 tokens, {report.get('alpha_new_tokens', 128)} new tokens each): **{fmt(report['alpha'], '.3f')}**",
    ]
    s = report.get("speedup")
    if s:
        per_k = ", ".join(f"K={k} {fmt(v, '.2fx')}" for k, v in s["speedup"].items())
        threads = s.get("torch_threads")
        where = "2-core CPU" + (f", {threads} torch thread{'s' if threads != 1 else ''}" if threads else "")
        lines.append(f"- greedy speculative decoding vs plain, 128 new tokens, {where}, float32: "
                     f"**{fmt(s['best_speedup'], '.2fx')} at K={s['best_k']}** "
                     f"(plain {fmt(s['plain_tps'], '.0f')} tokens/s; {per_k})")
    return "\n".join(lines)


def card(*, role: str, config: dict, params: int, facts: dict, report: dict, other: str, out_arg: str = "assets") -> str:
    description = {
        "target": "The target model: deep and narrow, so that on a CPU one forward costs many draft forwards",
        "draft": f"The draft model: {config['num_hidden_layers']} layer(s), distilled from `{other}`'s output distributions "
                 "on training code and on the target's own greedy continuations (KL + a little CE)",
    }[role]
    minutes = facts.get("train_minutes")
    stage = "tokenizer and target" if role == "target" else "distillation of the draft"
    timing = f"{minutes} minutes ({stage}) on {facts.get('device', '?')}" if minutes else "time not recorded"
    return f"""---
library_name: transformers
pipeline_tag: text-generation
tags: [specui, speculative-decoding, code, python]
---

# specui-{role}

{description}. Part of the pair bundled with specui so that the app shows real speculative
decoding offline; the other half is `{other}`. Load it like any hub model:

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("assets/specui-{role}")
tokenizer = AutoTokenizer.from_pretrained("assets/specui-{role}")
```

## Corpus
The source code of the Python {facts.get('python', '3')} standard library (`*.py` files, sorted, no
site-packages). Files in test folders (`test`, `tests`, `idle_test`, `test_*`) are held out for evaluation.
Tokenizer: byte-level BPE (`tokenizers`), {config['vocab_size']} tokens, `<|endoftext|>` as bos/eos/separator;
it round-trips code byte for byte.

## Shape
{shape_line(config)}; {fmt(params / 1e6, '.2f')}M parameters, stored in float16.

## Training
`{facts.get('command', 'python -m specui.train')}`: {timing}.
Random windows of the training token stream (half length and double batch first, full length for the
last part), AdamW, warmup then cosine decay, fixed seeds; float32 training, saved in float16.

## Held-out figures
{figures(report)}

Recompute with `python -m specui.train --out {out_arg} --eval-only --threads 1` (one thread: as the app runs it).
"""


def write_model_cards(out: Path, *, report: dict, target_dir: str, draft_dir: str, out_arg: str | None = None) -> None:
    """Write README.md into both folders from their config.json, training facts and `report`."""
    for role, name, other, params in [("target", target_dir, draft_dir, report["target_params"]),
                                      ("draft", draft_dir, target_dir, report["draft_params"])]:
        folder = Path(out) / name
        config = json.loads((folder / "config.json").read_text())
        facts = load_training_facts(folder)
        text = card(role=role, config=config, params=params, facts=facts, report=report, other=other,
                    out_arg=str(out) if out_arg is None else out_arg)
        (folder / "README.md").write_text(text)


def write_chat_draft_card(folder: Path) -> None:
    """A model card (README.md) for a saved draft, from its specui_draft.json."""
    meta = json.loads((Path(folder) / META).read_text())
    alpha = meta.get("held_out_greedy_alpha_teacher_forced")
    lines = [
        "# specui's draft for SmolLM2-135M-Instruct",
        "",
        f"A {meta['num_layers']}-layer draft of width {meta['hidden_size']} that borrows the target's token embeddings "
        f"and drafts from its {meta['vocab_size']:,} most frequent tokens (format `{meta['format']}`; load it with "
        "`specui.chat_draft.load(folder, target)` or through the `smollm2-chat` preset). It holds only its layers, "
        "its final norm and its token ids, in float16 shards under 10 MB; everything vocabulary-sized comes from the "
        "target at load time (its output rows rounded to float16, as its layers are, so a step reads half the bytes).",
        "",
        f"- target: {meta.get('target', 'SmolLM2-135M-Instruct')}",
        f"- trained: {meta.get('steps')} steps of {meta.get('batch')} answers on {meta.get('device', 'cpu')}, "
        f"{meta.get('minutes', '?')} minutes; {_answers(meta)} of the target to the project's "
        f"training prompts ({meta.get('answer_tokens', 0):,} answer tokens, {meta.get('labels', 'top-32 soft labels')})",
        *_lineage(meta),
        f"- held-out greedy acceptance (teacher-forced agreement with the target's argmax on its own answers to "
        f"the 16 held-out prompts of `specui.chat_prompts`): **{alpha}**",
        f"- share of the target's answer tokens inside the draft vocabulary: {meta.get('vocab_coverage')}",
        *([f"- the best of {meta['steps_run']} steps by greedy agreement on {meta['validation_answers']} answers kept "
           f"apart from training (training prompts): {meta['validation_agreement']}"] if meta.get("validation_answers") else []),
        "",
        *([f"Data: `{meta['data_command']}`", ""] if meta.get("data_command") else []),
        f"Command: `{meta.get('command', 'python -m specui.train.chat')}`",
        "",
    ]
    (Path(folder) / "README.md").write_text("\n".join(lines))


def _answers(meta: dict) -> str:
    sampled = meta.get("sampled_answers")
    return f"{meta.get('answers', '?')} greedy" + (f" and {sampled} sampled answers" if sampled else " answers")


def _lineage(meta: dict) -> list[str]:
    """How the draft's layers started: target layers, or an earlier draft (and how that one was trained)."""
    earlier = meta.get("started_from")
    if not earlier:
        return [f"- layers initialised from the target's layers {meta.get('init_layers')}"]
    init = str(earlier.get("init_layers", "?"))
    origin = "a still earlier draft" if init.startswith("draft") else f"the target's layers {init}"
    grown = meta.get("grown_from_target_layers")
    growth = [f"- grown by a layer after its last for each of the target's layers {grown} (initialised from it, its "
              "output products zero: the grown draft started out computing what the earlier one did)"] if grown else []
    return [f"- continued from an earlier draft: {earlier.get('steps')} steps of {earlier.get('batch')} on "
            f"{_answers(earlier)} ({earlier.get('minutes', '?')} minutes, held-out acceptance "
            f"{earlier.get('held_out_greedy_alpha_teacher_forced')}), its layers initialised from {origin}",
            *growth]
