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

from specui.train.cli import main, parse_args
from specui.train.common import train_tokenizer
from specui.train.config import TrainConfig

__all__ = ["TrainConfig", "main", "parse_args", "train_tokenizer"]
