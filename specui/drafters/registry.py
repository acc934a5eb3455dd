"""The drafters' names: the one place they are spelled out.

`MODEL` drafts with the small draft model, `PROMPT_LOOKUP` copies from the context, `MODEL_LOOKUP` copies
where the context repeats and asks the draft model elsewhere. The trained heads draft from the target itself: `EAGLE` (one decoder layer over the target's features), `MEDUSA` (one
head per position ahead), `EARLY_EXIT` (the target's first layers and an exit adapter). `LABELS` are
the words the UI shows for them.
"""

MODEL = "model"
PROMPT_LOOKUP = "prompt_lookup"
MODEL_LOOKUP = "model_lookup"
EAGLE = "eagle"
MEDUSA = "medusa"
EARLY_EXIT = "early_exit"
HEADS = (EAGLE, MEDUSA, EARLY_EXIT)  # drafters that are heads trained on a target (`specui.heads`)
MODEL_DRAFTERS = (MODEL, MODEL_LOOKUP)  # drafters that run the draft model (they need one)
DRAFTER_NAMES = (MODEL, MODEL_LOOKUP, *HEADS, PROMPT_LOOKUP)
LABELS = {MODEL: "draft model", MODEL_LOOKUP: "draft model + lookup", EAGLE: "EAGLE", MEDUSA: "Medusa",
          EARLY_EXIT: "early exit", PROMPT_LOOKUP: "prompt lookup"}  # name -> what people read


def name_of(label_or_name: str) -> str:
    """The drafter name for a UI label or a name (unchanged); an unknown string is returned as is."""
    for name, label in LABELS.items():
        if label_or_name == label:
            return name
    return label_or_name
