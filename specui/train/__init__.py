"""Train the bundled model pair from the Python standard library: `python -m specui.train`.

Three stages, each deterministic given the seed, the interpreter's stdlib and the torch build:
1. a byte-level BPE tokenizer (`tokenizers`) trained on the stdlib's non-test source files;
2. the target, a deep and narrow Llama-style causal LM, trained on random windows of that code;
3. the draft, a two-layer model with the same tokenizer, distilled from the target (specui.train.distill).
Then both are evaluated on the held-out test folders (specui.train.evaluate) and saved under `--out`
as complete Hugging Face model folders (fp16 safetensors in small shards, tokenizer, model card).

`--eval-only` recomputes the held-out figures and model cards from the shipped folders.
`--stage draft` reuses a saved target and tokenizer and retrains only the draft.
References: nanoGPT (karpathy/nanoGPT, train.py) for the loop; Leviathan et al. 2023 for why the
draft must be much cheaper than the target; Hinton et al. 2015 for distillation.

Modules: config (TrainConfig), common (tokenizer, batches, schedule, the target's loop, saving),
distill (the draft), evaluate (held-out figures), model_card (README.md of each folder), cli (`main`).
"""

import importlib

__all__ = ["TrainConfig", "main", "parse_args", "train_tokenizer"]
_HOMES = {"main": "specui.train.cli", "parse_args": "specui.train.cli", "train_tokenizer": "specui.train.common",
          "TrainConfig": "specui.train.config"}


def __getattr__(name: str):
    """The package's names, imported on first use: a module of it that needs no torch (chat_shape, which
    tools/gpu_round.py reads its arguments with) is imported without it, and an argument's mistake answers at once."""
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'specui.train' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The package's own names and those imported on first use: `dir()`, `help()` and an editor's completion list
    them (they left out the four that `__getattr__` gives)."""
    return sorted({*globals(), *_HOMES})
