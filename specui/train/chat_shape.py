"""The shapes the chat draft's trainer takes on its command line, checked as text: `python -m specui.train.chat`'s
--drafts and --grow, and tools.gpu_round's --new-draft and --grow-draft, which hand them on to it: one check, made as
each command reads its arguments (tools.gpu_round's trainer starts minutes in, on a GPU paid for by the second)."""

from __future__ import annotations

import re


def drafts_problem(shape: str, flag: str = "--drafts") -> str | None:
    """Why `shape` is no new draft's shape 'LAYERS:TARGET_LAYERS' (e.g. 2:0,1: two layers, initialised from the
    target's layers 0 and 1, at most one each, in order), said naming `flag`; None when it is one."""
    # one shape: a second after ';' was read past, and target layers past the draft's were left out, unsaid
    if not re.fullmatch(r"\d+:\d+(,\d+)*", shape) or int(shape.split(":")[0]) < 1:
        return f"{flag} {shape}: expected LAYERS:TARGET_LAYERS, one shape, e.g. 2:0,1 (at least one layer)"
    layers, init = shape.split(":")
    if len(init.split(",")) > int(layers):
        return (f"{flag} {shape}: {len(init.split(','))} target layers for {layers} draft layers, one each in order: "
                f"name at most {layers}")
    return None


def grow_problem(layers: str, flag: str = "--grow") -> str | None:
    """Why `layers` is no list of target layer indices separated by commas (the layers a draft grows by); None when
    it is one."""
    if not all(part.strip().isdigit() for part in layers.split(",")):
        return f"{flag} {layers}: expected target layer indices separated by commas, e.g. 2,3"
    return None
