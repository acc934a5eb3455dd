"""The drafters' names: the one place they are spelled out.

`MODEL` drafts with the small draft model, `PROMPT_LOOKUP` copies from the context, `MODEL_LOOKUP` copies
where the context repeats and asks the draft model elsewhere. The trained heads draft from the target
itself: `EAGLE` (one decoder layer over the target's features), `MEDUSA` (one head per position ahead),
`EARLY_EXIT` (the target's first layers and an exit adapter); `EARLY_EXIT_LOOKUP` copies where the context
repeats and asks the early exit elsewhere. `LABELS` are the words the UI shows for them.
"""

MODEL = "model"
PROMPT_LOOKUP = "prompt_lookup"
MODEL_LOOKUP = "model_lookup"
EAGLE = "eagle"
MEDUSA = "medusa"
EARLY_EXIT = "early_exit"
EARLY_EXIT_LOOKUP = "early_exit_lookup"
HEADS = (EAGLE, MEDUSA, EARLY_EXIT)  # the heads trained on a target (`specui.heads`)
HEAD_OF = {EAGLE: EAGLE, MEDUSA: MEDUSA, EARLY_EXIT: EARLY_EXIT, EARLY_EXIT_LOOKUP: EARLY_EXIT}  # drafter -> its head
HEAD_DRAFTERS = tuple(HEAD_OF)  # drafters that need a head (the one `HEAD_OF` names)
MODEL_DRAFTERS = (MODEL, MODEL_LOOKUP)  # drafters that run the draft model (they need one)
COPIES = (MODEL_LOOKUP, EARLY_EXIT_LOOKUP)  # drafters that copy where the context repeats (`specui.drafters.copies`)
DRAFTER_NAMES = (MODEL, MODEL_LOOKUP, *HEAD_DRAFTERS, PROMPT_LOOKUP)
LABELS = {MODEL: "draft model", MODEL_LOOKUP: "draft model + lookup", EAGLE: "EAGLE", MEDUSA: "Medusa",
          EARLY_EXIT: "early exit", EARLY_EXIT_LOOKUP: "early exit + lookup",
          PROMPT_LOOKUP: "prompt lookup"}  # name -> what people read


def name_of(label_or_name: str) -> str:
    """The drafter name for a UI label or a name, in any case ("prompt lookup", "EAGLE", "Model" -> "prompt_lookup",
    "eagle", "model"); an unknown string is returned as is."""
    said = label_or_name.strip().lower() if isinstance(label_or_name, str) else label_or_name
    for name, label in LABELS.items():
        if said in (name, label.lower()):
            return name
    return label_or_name
