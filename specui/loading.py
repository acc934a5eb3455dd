"""Load a preset's target, draft and tokenizer through `from_pretrained`, the same path for the bundled
pair (local folders) and for Hub models (each model as specui.pretrained reads it), one load at a time.

Failures become a `LoadError` whose message names the preset and says what to do; callers (the app)
show it and keep serving whatever was loaded before.
"""

from __future__ import annotations

import numbers
import os
import threading
from collections import OrderedDict
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from specui import chat_draft, hub, int8, native, packaged, spaces
from specui.kv import model_device
from specui.load_checks import (  # the first two torch-free: a refusal before torch loads
    LoadError, check_before_loading, check_causal, check_chat_template, check_exact_forward, conversation_memory,
    drop_eos_outside, hub_models, read_tokenizer)
from specui.presets import ConfigError, Preset
from specui.pretrained import _load_draft, _load_head, _model_kwargs, pick_device  # noqa: F401 (pick_device: callers')
from specui.turns import LoadTurn, in_turn


@dataclass
class LoadedPair:
    preset: Preset
    target: torch.nn.Module
    draft: torch.nn.Module | None
    tokenizer: object  # a transformers tokenizer
    heads: dict = field(default_factory=dict)  # drafter name -> a head trained on the target (specui.heads)
    conversations: object = field(default_factory=lambda: _prompt_caches())  # the app's chats' target caches

    def engine(self):
        """A `SpeculativeEngine` over this pair and its heads; a run that names no drafter drafts as the preset says."""
        from specui.engine import SpeculativeEngine

        return SpeculativeEngine(self.target, self.draft, heads=self.heads, prompt_threads=self.prompt_threads,
                                 drafter=self.preset.drafter)

    @property
    def prompt_threads(self) -> int | None:
        """The preset's `prompt_threads` as a count ("all": the cores this process may run on); None off a CPU."""
        wanted = self.preset.prompt_threads
        if wanted is None or self.device.type != "cpu":
            return None
        if wanted == "all":
            return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return wanted

    @property
    def device(self) -> torch.device:
        return model_device(self.target)


def _prompt_caches():
    """A pair's conversation caches (`specui.cache_pool.PromptCaches`), within SPECUI_CONVERSATION_MEMORY bytes
    (e.g. 2GB) or else the default budget: a quarter of the memory they live in (SmolLM2: ~46 KB a token)."""
    from specui.cache_pool import PromptCaches

    return PromptCaches(budget=conversation_memory())


def apply_threads(pair: LoadedPair) -> None:
    """Give torch the preset's CPU thread count when its target runs on a CPU. Tiny models run several
    times faster on one thread than on two that fight over a busy core."""
    if pair.preset.threads and pair.device.type == "cpu":
        torch.set_num_threads(pair.preset.threads)


_LOADS = LoadTurn()  # one load at a time in a process: see load_pair


def load_pair(preset: Preset, *, progress: Callable[[str], None] | None = None, checked: bool = False) -> LoadedPair:
    """Load everything a preset names. `progress` receives short status lines. checked: `check_before_loading`
    ran already (`PairCache`, before it let the loaded pairs go): not again (it may ask the Hub).

    Loads take turns: two of transformers' `from_pretrained` at once in one process (two visitors' presets, a script's
    threads) are not safe: with transformers 5.x a tied output layer came out untied and newly initialised (the load
    report's "lm_head.weight MISSING": a silently different target), and the lazy `from transformers import ...` of
    two threads at once raised ImportError."""
    _refuse_within(_LOADS, f"load_pair({preset.name!r})")
    say = _told(progress)
    return in_turn(_LOADS, say, lambda: _load_pair(preset, say, checked=checked))


_SAYING = threading.local()  # `line`: the status line a load's progress function is being given on this thread


def _told(progress: Callable[[str], None] | None) -> Callable[[str], None]:
    """`progress` (None: quiet), noting on this thread the line it is being given (for `_refuse_within`)."""
    def say(line: str) -> None:
        before, _SAYING.line = getattr(_SAYING, "line", None), line
        try:
            progress(line)
        finally:
            _SAYING.line = before
    return (lambda _msg: None) if progress is None else say


def _refuse_within(turn: LoadTurn, asked: str) -> None:
    """A LoadError, which the app shows as a load's failure, when this thread holds `turn`: a load asked for by the
    progress function of a load on this thread would wait for itself (`in_turn` refuses it: a plain RuntimeError)."""
    if turn.owner == threading.get_ident():
        raise LoadError(f"{asked} was called within another load on the same thread (from its progress function, as "
                        f"it was given {getattr(_SAYING, 'line', None)!r}): it would wait for itself. Load one after "
                        "the other: note in the progress function what to load, and load it once the first returned")


def _load_pair(preset: Preset, say: Callable[[str], None], *, checked: bool) -> LoadedPair:
    if not checked:
        check_before_loading(preset)  # before transformers is imported: a broken HF_ENDPOINT stops that import
    cached = hub.from_cache_alone(hub_models(preset))  # the Hub out of reach, its models cached: no minutes of retries
    if cached:
        say("The Hugging Face Hub cannot be reached: loading from the local cache")
    from transformers import AutoModelForCausalLM

    try:
        target_ref = _folder(preset.target, say)
        say(f"Loading the tokenizer of {preset.target}")
        tokenizer = read_tokenizer(target_ref, f"Preset '{preset.name}': the target {preset.target}",
                                   revision=preset.revision, trust_remote_code=preset.trust_remote_code,
                                   local_files_only=cached)
        check_chat_template(preset, tokenizer)  # before the weights: a base model's tokenizer has none
        say(f"Loading the target {preset.target}")
        target = AutoModelForCausalLM.from_pretrained(
            target_ref, local_files_only=cached, **_model_kwargs(
                preset, quantization=preset.quantization, revision=preset.revision, device=preset.device,
                device_map=preset.device_map))
        check_causal(target, f"Preset '{preset.name}': the target {preset.target}")
        check_exact_forward(preset, target, f"Preset '{preset.name}': the target {preset.target}")
        drop_eos_outside(target)  # said once here, not by each engine built on it
        draft = None
        if preset.draft is not None:
            say(f"Loading the draft {preset.draft}")
            draft = _load_draft(preset, _folder(preset.draft, say), target, tokenizer, local_files_only=cached)
        heads = {}
        for name, folder in preset.heads:
            say(f"Loading the {name} head {folder}")
            heads[name] = _load_head(folder, target, where=f"Preset '{preset.name}': heads.{name}: ")
        if preset.int8_drafters:  # specui's own drafters rounded to int8 rows: a quarter of the bytes a step
            own = [*heads.values(),
                   *([draft] if draft is not None and chat_draft.is_draft_folder(preset.draft) else [])]
            for drafter in own:
                int8.round_drafter(drafter)
        if model_device(target).type == "cpu":  # built here, not in the first reply (cached: at once)
            if native.needs_compiling():  # said only when it compiles: loading a built one is at once
                say("Compiling specui's native kernels (once per machine: about 10 s)")
            native.kernel()
    except LoadError:
        raise
    except packaged.PackagedModelError as e:
        said = _wheel_said(preset, e)
        raise LoadError(f"Preset '{preset.name}': {said}", for_visitors=said != str(e)) from e
    except OSError as e:
        hint = ""
        if not preset.is_local and ("connect" in str(e).lower() or os.environ.get("HF_HUB_OFFLINE") == "1" or cached):
            hint = (" The Hugging Face Hub cannot be reached (offline, or HF_HUB_OFFLINE=1) and the weights are not in"
                    " the local cache: connect once to download them, or choose a preset with local weights.")
        raise LoadError(f"Preset '{preset.name}' could not be loaded: {_short(e)}{hint}") from e
    except (ValueError, ImportError, RuntimeError) as e:
        raise LoadError(f"Preset '{preset.name}' could not be loaded: {_short(e)}") from e
    say("Ready")
    pair = LoadedPair(preset=preset, target=target.eval(), draft=draft.eval() if draft is not None else None,
                      tokenizer=tokenizer, heads=heads)
    apply_threads(pair)
    return pair


def _folder(ref: str, say: Callable[[str], None]) -> str:
    """What from_pretrained reads for a model reference: a packaged model's or a GGUF file's converted folder (converted
    once, then cached), else the reference itself (a folder or a Hub id)."""
    if packaged.is_packaged(ref):
        return str(packaged.local_folder(ref, progress=say))
    if packaged.is_gguf(ref):
        return str(packaged.gguf_folder(ref, progress=say))
    return ref


def _wheel_said(preset: Preset, problem: packaged.PackagedModelError) -> str:
    """`problem` as its reader can act on it: on a Space, a packaged model whose wheel is not installed says what a
    visitor can choose instead (`spaces.wheel_for_visitor`), where it said the pip command, which only the Space's
    owner could act on, and not by running it (a Space installs requirements.txt alone)."""
    missing = [ref for ref in (preset.target, preset.draft)
               if ref and packaged.is_packaged(ref) and not _installed(ref)]
    if not (missing and spaces.on_spaces()):
        return str(problem)
    return spaces.wheel_for_visitor(packaged.lookup(missing[0]).package)


def _installed(ref: str) -> bool:
    """Whether the wheel of the packaged model `ref` is installed (its converted folder aside)."""
    try:
        packaged.source_file(packaged.lookup(ref))
    except packaged.PackagedModelError:
        return False
    return True


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else type(e).__name__
    return first if len(first) < 400 else first[:400] + "…"


class PairCache:
    """Loaded pairs by preset name, the most recent `capacity` kept; one load at a time."""

    def __init__(self, capacity: int = 1):
        self.capacity = capacity
        self._pairs: OrderedDict[str, LoadedPair] = OrderedDict()
        self._lock = LoadTurn()  # one load through this cache at a time (`in_turn`)

    def get(self, preset: Preset, *, progress: Callable[[str], None] | None = None) -> LoadedPair:
        """`preset`'s pair, loaded if need be, after any other load through this cache (a visitor's, the preload)."""
        _refuse_within(self._lock, f"PairCache.get({preset.name!r})")
        progress = _told(progress)
        return in_turn(self._lock, progress, lambda: self._get(preset, progress))

    def holds(self, name: str) -> bool:
        """Whether the pair of the preset `name` is loaded here now."""
        return name in self._pairs

    def _get(self, preset: Preset, progress: Callable[[str], None] | None) -> LoadedPair:
        if preset.name in self._pairs:
            self._pairs.move_to_end(preset.name)
            apply_threads(self._pairs[preset.name])
            return self._pairs[preset.name]
        full = len(self._pairs) >= self.capacity
        if full:  # the oldest go first: the new pair loads with their memory free,
            check_before_loading(preset)  # once what can be known before loading (a missing folder) is fine
            while len(self._pairs) >= self.capacity:
                self._pairs.popitem(last=False)
            give_back_memory()
        pair = load_pair(preset, progress=progress, checked=full)  # checked once, not again in the load
        self._pairs[preset.name] = pair
        return pair


def give_back_memory() -> None:
    """Free what pairs let go now (their tensors form reference cycles with their modules), and have the C allocator
    return freed pages to the system (glibc's malloc_trim): it keeps them otherwise, some 640 MB after SmolLM2's
    pair went, counted as the process's memory by the system, a Space's limit and the next load's."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl): its allocator decides
        pass


def load_engine(preset: str | Preset | None = None, config=None, *, device=None,
                progress: Callable[[str], None] | None = None, warm_up: bool = True, checked: bool = False):
    """A ready `SpeculativeEngine` for a preset of models.yaml (None: its default), for scripts and
    notebooks:

        engine = specui.load_engine()  # the default chat model ("bundled": a tiny pair, no chat template)
        ids = engine.tokenizer.apply_chat_template([{"role": "user", "content": "Hi!"}], add_generation_prompt=True)
        result = engine.generate(ids, max_new_tokens=64)  # help(engine.generate): its settings
        print(engine.tokenizer.decode(result.token_ids, skip_special_tokens=True), result)

    preset: a preset's name ('smollm2-chat', the default; 'bundled'; `specui.presets.load_config().names` lists
    them) or a `Preset`. Where it runs is the preset's (device, dtype, threads in models.yaml): `device=` moves it;
    for the rest, `load_engine(dataclasses.replace(load_config().get(NAME), dtype="bfloat16"))`. The engine carries
    `.tokenizer`, `.preset` and `.drafters` (the drafter names it can use); a run that names no drafter uses the
    preset's (`drafter:` in models.yaml), and a run built from keywords drafts with the preset's K and draft confidence
    for its drafter unless it names them (`num_draft_tokens`, `draft_confidence`), as the app does.

    config: a models.yaml path, a loaded `Config`, or a models.yaml's content as a dict (its local paths relative to
    the working directory), where a preset's name is looked up; None: the models.yaml beside the package. A `Preset`
    given as preset is taken as it is, and config with it is refused.
    device: where the models run ("cpu", "cuda", "cuda:1", "mps"), in place of the preset's device (None: the
    preset's; models.yaml's default is CUDA when present, else CPU).
    progress: a function given each status line while it loads (e.g. progress=print); None: quiet.
    warm_up: run both paths a few tokens first, as the app does when it starts: a first run prepares the forward
    (the chat model's native products: 1.7 s), which would otherwise be timed as that run's prompt.
    checked: `check_before_loading` ran already on this preset (a command line's `check_preset`): not again (it may
    ask the Hub), as `load_pair`'s; checked again with device= (a GPU asked for is checked with it).
    """
    from specui.presets import Config, load_config, parse_config

    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a function that takes a status line, e.g. progress=print, or None; not a "
                        f"{type(progress).__name__}")
    for name, flag in (("warm_up", warm_up), ("checked", checked)):  # checked="no" would skip the checks
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    if device is not None:  # checked before any load: a misspelt one failed only as the loaded models moved
        device = _device(device)
    if isinstance(preset, Preset) and config is not None:  # a Preset's paths were resolved when its file was read
        raise ConfigError(f"load_engine: config= finds a preset by name, and preset is a Preset already (its paths "
                          f"resolved when its models.yaml was read), which is used as it is: give "
                          f"load_engine(preset) without config, or the name: load_engine({preset.name!r}, config=...)")
    if not isinstance(preset, Preset):
        if isinstance(config, dict):
            config = parse_config(config, path=Path.cwd() / "models.yaml")
        elif config is not None and not isinstance(config, (Config, str, os.PathLike)):
            raise ConfigError(f"config must be a models.yaml path, a Config or a dict, not a {type(config).__name__}")
        config = config if isinstance(config, Config) else load_config(config)
        preset = config.get(preset)  # a typo: its error names the preset it is closest to
    if device is not None and preset.device_map:
        raise ConfigError(f"load_engine: preset {preset.name!r} spreads its target with device_map: "
                          f"{preset.device_map}, which device= would not move; leave device out")
    preset = preset if device is None else replace(preset, device=device)
    pair = load_pair(preset, progress=progress, checked=checked and device is None)  # device=: its own check
    engine = pair.engine()
    engine.tokenizer, engine.preset = pair.tokenizer, preset
    engine.tuning = lambda drafter, keywords: {
        "num_draft_tokens": preset.k_for(drafter),
        "draft_confidence": preset.confidence_for(drafter, tree=_is_tree(keywords.get("tree_width")))}
    if warm_up:
        from specui import lesson

        lesson.warm_up(engine, pair.tokenizer("Hello!")["input_ids"] or [0])
    return engine


def _device(device) -> str:
    """load_engine's device= as torch names it ("cuda", "cuda:1"; torch.device("cuda") too), or refused by name."""
    try:
        return str(torch.device(device))
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(f"load_engine: device={device!r} is not a device (cpu, cuda, cuda:1, mps)") from None


def _is_tree(tree_width) -> bool:
    """Whether a run's `tree_width` keyword asks for a token tree; one that is no number is not (DecodeSettings then
    refuses it by name)."""
    return isinstance(tree_width, numbers.Real) and tree_width > 1
