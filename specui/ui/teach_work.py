"""The Teach tab's actions that run a model, as data: each runs in one `GpuWork` call (`specui.ui.gpu_calls`: one
ZeroGPU allocation on a ZeroGPU Space, where a GPU exists only inside such a call; a plain call elsewhere).

ZeroGPU pickles what goes into the call and what comes out, and a component does not travel (nor a lock or a
model): the controls' values go as a dict by name (`values`), and the settings check (`teach_prepare.prepare`) reads
that dict through `NAMED`, the controls standing as their own names. An answer keyed by names comes back to the
page's components with `by_component`.
"""

from __future__ import annotations

from types import SimpleNamespace

# the Teach controls every decoding handler reads (teaching.Controls' fields of those names)
SETTINGS = ("prompt", "preset", "drafter", "k", "confidence", "temperature", "penalty", "max_new", "seed", "context")
NAMED = SimpleNamespace(**{name: name for name in SETTINGS})


def values(c, data: dict) -> dict:
    """The values of the controls `c` in an event's inputs `data`, by name: plain data for a `GpuWork` call."""
    return {name: data.get(getattr(c, name)) for name in SETTINGS}


def by_component(components, answer: dict) -> dict:
    """An answer keyed by the names of `components`' fields, keyed by those components."""
    return {getattr(components, name): value for name, value in answer.items()}
