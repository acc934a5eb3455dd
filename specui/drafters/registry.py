"""The drafters' names: the one place they are spelled out.

`MODEL` drafts with the small draft model, `PROMPT_LOOKUP` copies from the context. `LABELS` are the
words the UI shows for them.
"""

MODEL = "model"
PROMPT_LOOKUP = "prompt_lookup"
DRAFTER_NAMES = (MODEL, PROMPT_LOOKUP)
LABELS = {MODEL: "draft model", PROMPT_LOOKUP: "prompt lookup"}  # name -> what people read


def name_of(label_or_name: str) -> str:
    """The drafter name for a UI label or a name (unchanged); an unknown string is returned as is."""
    for name, label in LABELS.items():
        if label_or_name == label:
            return name
    return label_or_name
