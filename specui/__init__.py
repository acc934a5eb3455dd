"""specui: exact speculative decoding, with every token's provenance, on Hugging Face transformers models.

Start with a preset's engine: `engine = specui.load_engine()` (models.yaml's default, a small chat model;
`load_engine("bundled")`: a tiny pair), then `engine.generate(ids, max_new_tokens=64)` on a prompt's token ids (from
`engine.tokenizer`). help(specui.load_engine) has a whole example and the presets, help(engine.generate) every
setting, help(engine.stream) a run round by round; `SpeculativeEngine(target, draft)` takes your own transformers
models. docs/engine.md has it all, and how the output stays exactly the target's. A drafter of your own is any
object with the `Drafter` methods (help(specui.Drafter), docs/drafters.md); `specui.check_drafter(engine, drafter,
ids)` tests that it keeps the output exact.

The public names are imported lazily, so `import specui` stays cheap and never imports gradio.

Importing specui before torch sets OMP_WAIT_POLICY=PASSIVE unless it is set already. With two or more
CPU threads, torch's OpenMP threads otherwise spin for a while after each small parallel op (a softmax
over a verify's rows) and take the cores that specui's native products split their work onto: on a
2-core CPU with 2 threads, SmolLM2's speculative rounds ran 1.24x slower (54.5 -> 67.8 ms a round).
Set OMP_WAIT_POLICY=ACTIVE to keep OpenMP's default (transformers' own generate is ~10% faster with it).
"""

import os as _os

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by OpenMP when torch loads: before `import torch`

__version__ = "0.1.0"

_EXPORTS = {
    "SpeculativeEngine": "specui.engine",
    "load_engine": "specui.loading",
    "DecodeSettings": "specui.settings",
    "GenerationResult": "specui.events",
    "Kind": "specui.events",
    "Round": "specui.events",
    "Sampling": "specui.sampling",
    "logits_to_probs": "specui.sampling",
    "verify": "specui.verify_rule",
    "Verdict": "specui.verify_rule",
    "Draft": "specui.drafters",
    "Drafter": "specui.drafters",
    "ModelDrafter": "specui.drafters",
    "ModelLookupDrafter": "specui.drafters",
    "PromptLookupDrafter": "specui.drafters",
    "check_drafter": "specui.drafter_check",
    "DrafterCheck": "specui.drafter_check",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specui' has no attribute {name!r}")


def __dir__():
    """The lazy names too, so that a notebook's completion offers `specui.load_engine` before its first use."""
    return sorted({*globals(), *_EXPORTS})
