"""specui: exact speculative decoding, with every token's provenance, on Hugging Face transformers models.

The public names are imported lazily, so `import specui` stays cheap and never imports gradio.
"""

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
    "verify": "specui.verify",
    "Verdict": "specui.verify",
    "Draft": "specui.drafters",
    "Drafter": "specui.drafters",
    "ModelDrafter": "specui.drafters",
    "PromptLookupDrafter": "specui.drafters",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specui' has no attribute {name!r}")
