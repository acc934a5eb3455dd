"""A ZeroGPU Space's start: the default pair loads once, in the server's process before it serves, and the worker
process of every GPU call (Chat's `GpuCalls`, Teach's `GpuWork`) forks with it; a closed page's conversation caches,
held in Chat's worker, go there too.

ZeroGPU cannot run here (no GPU, no device API, and installing the `spaces` package would change what gradio imports
for every test), so the package is stood in for by `StandIn`, doing what spaces 0.51.3 does that matters here:
- as it is imported, it enters a torch function mode on the importing thread alone (spaces/zero/torch/patching.py
  `patch`: torch keeps modes per thread) that keeps on the CPU a tensor put on 'cuda' (its `cuda_aliases`), and it
  patches torch.cuda for every thread (`is_available()` says yes); on any other thread, a tensor put on 'cuda' reaches
  torch's CUDA init, which the package makes raise (here torch, a CPU build, raises by itself);
- each decorated function forks its own worker process from the server at its first call and reuses it
  (spaces/zero/wrappers.py `Worker`, one `workers` dict per decorated function); the worker leaves the emulation
  (`torch.unpatch`) and moves the kept tensors onto its GPU (here they stay on the CPU); arguments and every yielded
  value are pickled both ways; the task runs on a thread of the worker.
The patch is global, and a fork of pytest's own process would carry its threads, so each scenario runs in a fresh
interpreter (`python -c`, this module's `scenario`). Everything else is real: the app's Showcase, the bundled pair,
a chat run and the Teach tab's Decode.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import traceback
import types
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tests.helpers import ROOT

PROMPT = "def main(argv):\n    "
FORK = multiprocessing.get_context("fork")


def _cpu(value):
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("cpu")
    if isinstance(value, str) and value.startswith("cuda"):
        return "cpu"
    return value


class FakeCuda(TorchFunctionMode):
    """The package's function mode, as far as a load goes: 'cuda' asked for, the tensor kept on the CPU, counted."""

    def __init__(self):
        super().__init__()
        self.kept = 0

    def __torch_function__(self, func, types=(), args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        asked = func is torch.Tensor.cuda
        if asked:
            func, args = torch.Tensor.to, (args[0], "cpu")
        if func is torch.Tensor.to:
            moved = tuple(_cpu(a) for a in args[1:])
            asked |= moved != tuple(args[1:])
            args = (args[0], *moved)
        if "device" in kwargs and _cpu(kwargs["device"]) is not kwargs["device"]:
            kwargs["device"], asked = _cpu(kwargs["device"]), True
        result = func(*args, **kwargs)
        self.kept += asked
        return result


class StandIn:
    """`spaces` on a ZeroGPU Space, as the module docstring says; `GPU` is its decorator."""

    def __init__(self):
        self.mode = FakeCuda()
        self.saved = {name: getattr(torch.cuda, name) for name in ("is_available", "device_count", "current_device",
                                                                    "synchronize", "mem_get_info")}

    def patch(self):  # spaces' `import`: on this thread the mode, on every thread torch.cuda
        self.mode.__enter__()
        torch.cuda.is_available = lambda: True
        torch.cuda.device_count = lambda: 1
        torch.cuda.current_device = lambda: 0
        torch.cuda.synchronize = lambda *args: None
        torch.cuda.mem_get_info = lambda *args: (70 << 30, 80 << 30)

    def unpatch(self):  # in a worker: torch.cuda as torch has it (a GPU there: here none, the CPU decodes)
        for name, value in self.saved.items():
            setattr(torch.cuda, name, value)

    refuse = 0  # how many of the next calls ZeroGPU refuses before any worker runs (a visitor's quota spent)

    def GPU(self, *, duration=None):  # noqa: N802 (the package's name)
        def decorate(task):
            worker = []

            def call(*args, **kwargs):
                if self.refuse:  # spaces' handler asks the scheduler first, on the generator's first step
                    self.refuse -= 1
                    raise RuntimeError("You have exceeded your GPU quota")
                if not worker:  # forked from the server as it stands at the first call
                    calls, results = FORK.SimpleQueue(), FORK.SimpleQueue()
                    process = FORK.Process(target=self._serve, args=(task, calls, results), daemon=True)
                    process.start()
                    worker.append((calls, results))
                calls, results = worker[0]
                calls.put((args, kwargs))  # pickled
                while True:
                    kind, value = results.get()
                    if kind == "end":
                        return
                    if kind == "error":
                        raise RuntimeError(f"ZeroGPU worker error: {value}")
                    yield value
            return call
        return decorate

    def _serve(self, task, calls, results):
        self.unpatch()
        torch.set_num_threads(1)
        while True:
            args, kwargs = calls.get()

            def iterate():
                try:
                    for value in task(*args, **kwargs):
                        results.put(("value", value))  # pickled
                except Exception:
                    results.put(("error", traceback.format_exc()))
                results.put(("end", None))
            with ThreadPoolExecutor() as pool:
                pool.submit(iterate).result()


def _logged(path: str, what: str, fn):
    def wrapped(*args, **kwargs):
        result = fn(*args, **kwargs)
        with open(path, "a") as f:
            f.write(json.dumps([what, os.getpid(), [a for a in args if isinstance(a, str)], result
                                if isinstance(result, int) else None]) + "\n")
        return result
    return wrapped


def _in_thread(fn):
    """`fn()` on a thread of its own, as gradio runs a request's handler."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(value=fn()))
    thread.start()
    thread.join()
    return box["value"]


def scenario(log: str, preload_on: str) -> None:
    """Run in a fresh interpreter: the app's start under the stand-in (the default pair preloaded on this thread, which
    imported `spaces`, as app.py does, or on a thread of its own), then two chats from two pages, the first page
    closed between them, and one Teach Decode; loads and forgotten caches are written to `log` with their pid."""
    stand_in = StandIn()
    module = types.ModuleType("spaces")
    module.GPU = stand_in.GPU
    sys.modules["spaces"] = module
    stand_in.patch()  # `import spaces`, on this thread
    from specui import cache_pool, loading
    from specui.ui import teaching
    from specui.ui.session import Settings, Showcase, decode
    from tests.helpers import ui_config

    loading.load_pair = _logged(log, "load", loading.load_pair)
    cache_pool.PromptCaches.forget = _logged(log, "forget", cache_pool.PromptCaches.forget)
    showcase = Showcase(ui_config(), loading.PairCache())
    preset = showcase.config.get(None)
    if preload_on == "this thread":
        showcase.preload(preset)
    else:
        _in_thread(lambda: showcase.preload(preset))
    kept = stand_in.mode.kept

    def chat(owner):
        frame, run = list(decode(showcase, PROMPT, Settings(max_new_tokens=6), owner=owner))[-1]
        return frame.error or (frame.done and len(run.spec.token_ids) > 0)

    first = _in_thread(lambda: chat("page-1"))
    showcase.forget("page-1")  # the page closed (`demo.unload`)
    second = _in_thread(lambda: chat("page-2"))
    values = {"prompt": PROMPT, "preset": preset.name, "drafter": None, "k": 3, "confidence": 0.0,
              "temperature": 0.0, "penalty": 1.0, "max_new": 6, "seed": 0, "context": None}
    state = teaching.TeachState(showcase)
    [(run, _, _)] = _in_thread(lambda: list(state.work(teaching.decoded, values, "")))
    print(json.dumps({"main": os.getpid(), "kept": kept, "chats": [first, second], "teach": len(run.steps)}))


def scenario_refused(log: str) -> None:
    """Run in a fresh interpreter: page 1 chats and closes; page 2's chat is refused by ZeroGPU (its quota spent) before
    any worker runs, then page 2 chats again."""
    stand_in = StandIn()
    module = types.ModuleType("spaces")
    module.GPU = stand_in.GPU
    sys.modules["spaces"] = module
    stand_in.patch()
    from specui import cache_pool, loading
    from specui.ui.session import Settings, Showcase, decode
    from tests.helpers import ui_config

    cache_pool.PromptCaches.forget = _logged(log, "forget", cache_pool.PromptCaches.forget)
    showcase = Showcase(ui_config(), loading.PairCache())
    showcase.preload(showcase.config.get(None))

    def chat(owner):
        try:
            frame, run = list(decode(showcase, PROMPT, Settings(max_new_tokens=6), owner=owner))[-1]
        except RuntimeError as e:
            return str(e)
        return frame.error or (frame.done and len(run.spec.token_ids) > 0)

    first = _in_thread(lambda: chat("page-1"))
    showcase.forget("page-1")
    stand_in.refuse = 1
    refused = _in_thread(lambda: chat("page-2"))
    second = _in_thread(lambda: chat("page-2"))
    print(json.dumps({"main": os.getpid(), "chats": [first, refused, second]}))


def run_scenario(tmp_path, preload_on: str, *, refused: bool = False):
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "SPACES_ZERO_GPU": "true", "PYTHONPATH": str(ROOT)}
    for name in ("HF_DEACTIVATE_ASYNC_LOAD", "USE_HUB_KERNELS"):
        env.pop(name, None)
    code = (f"from tests.app.test_zero_gpu_preload import scenario_refused; scenario_refused({str(log)!r})" if refused
            else f"from tests.app.test_zero_gpu_preload import scenario; scenario({str(log)!r}, {preload_on!r})")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    told = json.loads(done.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return told, events, done.stderr


@pytest.mark.slow  # loads the bundled pair, forks workers, in a fresh interpreter
def test_the_pair_loads_once_before_serving_and_every_tabs_worker_forks_with_it(tmp_path):
    """The preload ran on a thread of its own (where the package fakes no CUDA), and transformers 5 copies weights
    onto the device in its own pool of threads: either way it failed (logged), and each GPU call's worker, Chat's and
    Teach's, loaded its own copy at its first call (again in every worker ZeroGPU forks afresh). Now the pair loads
    on the importing thread, its weights through the package's emulation, once; neither worker loads."""
    told, events, stderr = run_scenario(tmp_path, "this thread")
    loads = [pid for what, pid, _, _ in events if what == "load"]
    assert loads == [told["main"]], (events, stderr[-2000:])
    assert told["kept"] > 100, "the weights did not go through ZeroGPU's emulation of CUDA"
    assert told["chats"] == [True, True] and told["teach"] > 0
    assert "could not preload" not in stderr


@pytest.mark.slow  # loads the bundled pair, forks workers, in a fresh interpreter
def test_a_closed_pages_conversation_cache_goes_in_chats_worker(tmp_path):
    """`Showcase.forget` (a closed page) let go the caches of the server's process, which under ZeroGPU holds none: the
    worker kept them until newer ones pushed them out. Now the page's key goes with the next chat's call, no
    allocation of its own, and the worker lets its cache go."""
    told, events, _ = run_scenario(tmp_path, "this thread")
    forgotten = [(pid, count) for what, pid, owners, count in events if what == "forget" and owners == ["page-1"]]
    assert any(pid != told["main"] and count == 1 for pid, count in forgotten), events


@pytest.mark.slow  # loads the bundled pair, forks a worker, in a fresh interpreter
def test_a_closed_pages_cache_goes_in_the_worker_after_a_refused_call(tmp_path):
    """The closed pages' keys left with the next chat's call even when ZeroGPU refused it before any worker ran (a
    visitor's quota spent, no GPU free: common on a Space): lost, the worker kept those caches until newer ones pushed
    them out. Now a call that brought no frame leaves them for the next one."""
    told, events, _ = run_scenario(tmp_path, "this thread", refused=True)
    assert told["chats"][0] is True and "quota" in told["chats"][1] and told["chats"][2] is True, told
    forgotten = [(pid, count) for what, pid, owners, count in events if what == "forget" and owners == ["page-1"]]
    assert any(pid != told["main"] and count == 1 for pid, count in forgotten), events


@pytest.mark.slow  # loads the bundled pair in a fresh interpreter
def test_a_load_on_another_thread_is_refused_by_the_stand_in_as_by_zero_gpu(tmp_path):
    """The stand-in's own check: off the importing thread a load onto 'cuda' fails, as ZeroGPU's does, and the first
    request of each worker loads instead (why app.py preloads on its main thread under ZeroGPU)."""
    told, events, stderr = run_scenario(tmp_path, "a thread")
    loads = [pid for what, pid, _, _ in events if what == "load"]
    assert "could not preload" in stderr and told["main"] not in loads and len(set(loads)) == 2, events
