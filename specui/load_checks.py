"""What a preset's models must be for speculative decoding: what can be known before any loads (`check_before_loading`:
a folder or file that is not there, a GPU asked for and missing, the Hub out of reach; torch-free, so that a command
line refuses them before torch loads), and, as it loads, a causal language model that keeps a KV cache
(`check_causal`), a draft that tokenizes as its target does (`check_compatible`) and a tokenizer to read; each failure
a `LoadError` that says, for people, what to do (specui.loading loads, these check). And a target's own eos ids outside
its vocabulary are left out once as it loads (`drop_eos_outside`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from specui import hub, packaged, spaces
from specui.presets import COMMAND_LINE, DRAFT_SETTINGS, Preset


class LoadError(RuntimeError):
    """A preset could not be loaded; the message is meant for people. `for_visitors`: the message is meant for a
    Space's visitors too (what they can choose instead); most are for whoever runs the app (a path to check, a
    variable to set), and a Space's visitor is told less (`spaces.load_failure_said`)."""

    def __init__(self, message: str, *, for_visitors: bool = False):
        super().__init__(message)
        self.for_visitors = for_visitors


class HubUnreachableError(LoadError):
    """A preset's Hub model neither cached nor fetchable: this machine cannot reach the Hub (specui.loading's
    `check_before_loading` says so). The network failed, not the command: a command line exits 1 for it, not a usage
    mistake's 2 (specui.command_line.refusal_status)."""


def conversation_memory() -> int | None:
    """SPECUI_CONVERSATION_MEMORY in bytes (None: unset); a LoadError naming it when it is no size."""
    wanted = os.environ.get("SPECUI_CONVERSATION_MEMORY", "").strip()
    if not wanted:
        return None
    from specui.cache_pool import parse_bytes  # (with torch: only where the variable is set)

    try:
        return parse_bytes(wanted)
    except ValueError as e:
        raise LoadError(f"SPECUI_CONVERSATION_MEMORY: {e}; or unset it for the default (a quarter of the memory "
                        "the caches live in)") from None


def check_before_loading(preset: Preset) -> None:
    """Missing folders, quantization without CUDA and Hub models out of reach, said before anything heavy is loaded
    (torch only where a GPU is asked for)."""
    if problem := hub.endpoint_problem():
        raise LoadError(f"Preset '{preset.name}' cannot be loaded: {problem}.")
    conversation_memory()  # a mistyped size is said before the models load, not after
    for role, ref in (("target", preset.target), ("draft", preset.draft)):
        where = ("Check the path given on the command line (--target, --draft)." if preset.name == COMMAND_LINE
                 else f"Check the path in {_config(preset)} (local paths are relative to that file).")
        if ref and packaged.is_gguf(ref):
            if not Path(ref).is_file():
                raise LoadError(f"Preset '{preset.name}': the {role} GGUF file {ref} does not exist. {where}")
            try:
                packaged.require_gguf_package(Path(ref).name)
            except packaged.PackagedModelError as e:
                raise LoadError(f"Preset '{preset.name}': {e}") from None
        elif ref and Path(ref).is_absolute() and role == "target" and (Path(ref) / "specui_draft.json").is_file():
            raise LoadError(f"Preset '{preset.name}': the target folder {ref} is a specui draft (specui_draft.json), "
                            "which drafts for its target with the target's embeddings: give it as the draft, and its "
                            "target as the target.")
        elif ref and Path(ref).is_absolute() and not ((Path(ref) / "config.json").is_file() or is_draft_folder(ref)):
            gguf = sorted(Path(ref).glob("*.gguf")) if Path(ref).is_dir() else []  # the file given by its folder
            where = f"It holds {gguf[0].name}: give that file as the {role} ({gguf[0]})." if gguf else where
            if (Path(ref) / "specui_head.json").is_file():  # a trained head (specui.heads), no model of its own
                where = ("It is a specui head (specui_head.json): list it under the preset's heads in a models.yaml "
                         "(heads: {eagle: FOLDER}, or medusa, early_exit; and drafter: its name), not as a model.")
            why = (f" (it is a file: give the folder that holds it and config.json, {Path(ref).parent})"
                   if Path(ref).is_file() else "")  # a weights file given for its folder
            raise LoadError(f"Preset '{preset.name}': the {role} folder {ref} has no config.json{why}. {where}")
    if (kind := _half_on_cpu_of_another_kind(preset)) is not None:  # a folder's, before its weights (any once loaded)
        raise LoadError(f"Preset '{preset.name}': the target {preset.target} is a {kind!r} model, which runs its own "
                        f"transformers forward on this CPU (specui's lean forward computes Llama, Mistral and Qwen2 "
                        f"decoders), {_not_invariant(preset, preset.dtype)}")
    for name, folder in preset.heads:  # a head loads after the target: a folder that is not there is said now
        if not Path(folder).is_dir():
            raise LoadError(f"Preset '{preset.name}': heads.{name}: the head folder {folder} has no specui_head.json "
                            "(train one: python -m specui.train heads --help)")  # as the head's load says it
    for field_name in ("device", "draft_device"):
        wanted = getattr(preset, field_name) or ""
        if wanted.startswith("cuda") and not _has_cuda():
            raise LoadError(f"Preset '{preset.name}' asks for {field_name}: {wanted}, and this machine has no CUDA "
                            "GPU (or this torch was built without CUDA). Leave the device out (CPU here) or choose "
                            "another preset.")
        if wanted.startswith("mps") and not _has_mps():  # it failed as the weights moved, after the tokenizer
            raise LoadError(f"Preset '{preset.name}' asks for {field_name}: {wanted}, and this machine has no Apple "
                            "GPU that torch can use (MPS: a Mac with Apple silicon). Leave the device out or choose "
                            "another preset.")
    for key in DRAFT_SETTINGS:  # a Preset built in code (dataclasses.replace): as models.yaml's are refused
        if preset.draft is None and getattr(preset, key) not in (None, "none"):
            raise LoadError(f"Preset '{preset.name}': {key}: {getattr(preset, key)} is for a draft model, and this "
                            f"preset has none (its drafter is {preset.drafter}): leave {key} out, or give a draft")
    wants_cuda = preset.quantization != "none" or preset.draft_quantization != "none"
    if wants_cuda and not _has_cuda():
        key = "quantization" if preset.quantization != "none" else "draft_quantization"
        raise LoadError(f"Preset '{preset.name}' asks for {getattr(preset, key)} quantization, which needs a CUDA GPU "
                        f"(bitsandbytes); this machine has none. Choose a preset without quantization, or set {key}: "
                        f"none for presets.{preset.name} in {_config(preset)} (on a CPU, dtype: float32; bfloat16 "
                        "halves the memory of a Llama, Mistral or Qwen2 target, another kind's is refused in it).")
    missing, why = hub.out_of_reach(hub_models(preset))  # at once: transformers would retry for minutes
    if missing:
        answered = why != "cannot be reached"  # a status it retries on: down or overloaded, not this machine's network
        start = (f"Preset '{preset.name}' needs {' and '.join(missing)} from the Hugging Face Hub, which "
                 + (f"{why} (down or overloaded)" if answered else "this machine cannot reach")
                 + f", and {'they are' if len(missing) > 1 else 'it is'} not in the local cache")
        if spaces.on_spaces():  # the Space's owner reads this in its logs: what a Space can do about it
            first = "try again later" if answered else "check the Hub id (a gated or private model needs an HF_TOKEN " \
                                                       "secret)"
            raise HubUnreachableError(f"{start}: {first}, or set the Space's variable SPECUI_PRESET (Settings → "
                                      "Variables) to a preset with local weights, e.g. bundled.")
        where = "in the working directory" if preset.name == COMMAND_LINE else f"beside {_config(preset)}"
        first = "try again later, or use a cached or local model" if answered else \
            "connect once to download, or choose a preset with local weights"
        raise HubUnreachableError(f"{start}: {first}. (Meant as a local folder? There is no {missing[0]} {where}.)")


def _config(preset: Preset) -> str:
    """The file a refusal says to change: the one the preset was read from (`--config mine.yaml`), where it said
    models.yaml of every preset; models.yaml for the pair named on a command line, which has none."""
    return "models.yaml" if preset.name == COMMAND_LINE else preset.config_name


def _half_on_cpu_of_another_kind(preset: Preset) -> str | None:
    """The model_type of a local target folder that `check_exact_forward` will refuse once loaded (half precision on a
    CPU, a kind the lean forward does not compute), read from its config.json before the weights; else None (torch is
    imported only for a half-precision preset of such a folder, to ask whether a GPU is there)."""
    config = Path(preset.target) / "config.json"
    if preset.dtype not in ("float16", "bfloat16") or preset.device_map or not config.is_file():
        return None
    try:
        kind = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):  # transformers will say what is wrong with it
        return None
    from specui.decoders import MODEL_TYPES

    on_cpu = (preset.device or "").startswith("cpu") or (preset.device is None and not _has_cuda())
    return kind if isinstance(kind, str) and kind not in MODEL_TYPES and on_cpu else None


def hub_models(preset: Preset) -> list[tuple[str, str | None]]:
    """The preset's models that come from the Hub, as (id, revision): not a local folder, not a packaged model."""
    models = ((preset.target, preset.revision), (preset.draft, preset.draft_revision))
    return [(ref, rev) for ref, rev in models if ref and not Path(ref).is_absolute() and not packaged.is_packaged(ref)]


def is_draft_folder(ref: str) -> bool:
    """Whether a folder is there and holds a chat draft (`specui.chat_draft`, which imports torch: asked only then)."""
    if not Path(ref).is_dir():
        return False
    from specui import chat_draft

    return chat_draft.is_draft_folder(ref)


def _has_mps() -> bool:
    """Whether torch can use an Apple GPU (torch imported only for a preset that asks for one)."""
    import torch

    return torch.backends.mps.is_available()


def _has_cuda() -> bool:
    """Whether torch sees a CUDA GPU (torch imported only for a preset that asks for one)."""
    import torch

    return torch.cuda.is_available()


def check_compatible(preset: Preset, target_tokenizer, *, folder: str | None = None,
                     local_files_only: bool = False) -> None:
    """The draft (read from `folder`, default the preset's draft; from the local cache alone with `local_files_only`)
    must tokenize exactly as the target does, or its proposals mean other text."""
    draft_tokenizer = read_tokenizer(folder or preset.draft, f"Preset '{preset.name}': the draft {preset.draft}",
                                     revision=preset.draft_revision, trust_remote_code=preset.trust_remote_code,
                                     local_files_only=local_files_only)
    draft_vocab, target_vocab = draft_tokenizer.get_vocab(), target_tokenizer.get_vocab()
    if draft_vocab != target_vocab:
        raise LoadError(
            f"Preset '{preset.name}': the draft {preset.draft} and the target {preset.target} use different "
            f"tokenizers ({_first_difference(draft_vocab, target_vocab)}), so the draft's token ids would mean other "
            "text to the target. Pick a draft from the target's model family (the same tokenizer)."
        )


def _first_difference(draft_vocab: dict[str, int], target_vocab: dict[str, int]) -> str:
    """How two vocabularies (token -> id) differ, in words: their sizes, else the lowest id they disagree on."""
    if len(draft_vocab) != len(target_vocab):
        return f"the draft's has {len(draft_vocab)} tokens, the target's {len(target_vocab)}"
    draft_ids, target_ids = ({i: t for t, i in vocab.items()} for vocab in (draft_vocab, target_vocab))
    ids = sorted(set(draft_ids) | set(target_ids))
    i = next((i for i in ids if draft_ids.get(i) != target_ids.get(i)), None)
    if i is None:  # tokens that share an id: the mappings differ though each id reads the same
        return "their vocabularies differ"
    return (f"both have {len(target_vocab)} tokens, but id {i} is {draft_ids.get(i)!r} in the draft's and "
            f"{target_ids.get(i)!r} in the target's")


def check_chat_template(preset: Preset, tokenizer) -> None:
    """A preset that wraps prompts in the chat template (`chat_template: true`, `--chat`) needs a target tokenizer that
    has one: a base model's has none, and each reply failed in transformers' apply_chat_template with a traceback."""
    if preset.chat_template and not getattr(tokenizer, "chat_template", None):
        change = ("leave out --chat (python -m specui's --chat-template)" if preset.name == COMMAND_LINE
                  else f"set chat_template: false for presets.{preset.name} in {_config(preset)}")
        raise LoadError(f"Preset '{preset.name}': the target {preset.target} has no chat template in its tokenizer (a "
                        f"base model?): {change}, and prompts are continued as text; or save the instruct model's "
                        "tokenizer beside its weights.")


def check_exact_forward(preset: Preset, target, who: str) -> None:
    """Greedy output equals plain decoding's where the target's forward is batch-invariant: specui's lean forward is
    (Llama, Mistral, Qwen2 decoders, `specui.decoders.plain_decoder`), and in float32 on a CPU transformers' own is
    too. Another model's own forward in float16 or bfloat16 on a CPU rounds a verify's rows otherwise than a one-token
    forward's (docs/engine.md), so a near-tie could part the two outputs: refused, saying to set dtype."""
    import torch

    from specui.decoders import MODEL_TYPES, plain_decoder
    from specui.kv import model_device

    device, dtype = model_device(target), next(target.parameters()).dtype
    if device.type == "cpu" and dtype in (torch.float16, torch.bfloat16) and not plain_decoder(target, device):
        kind = getattr(target.config, "model_type", None)
        why = ("specui's lean forward computes Llama, Mistral and Qwen2 decoders" if kind not in MODEL_TYPES else
               f"specui's lean forward computes a {kind} decoder with full sdpa attention (no sliding window), SiLU "
               "and no hook or adapter, which this one's config or modules are not")
        raise LoadError(f"{who} ({type(target).__name__}) runs its own transformers forward on this CPU ({why}), "
                        + _not_invariant(preset, str(dtype).removeprefix("torch.")))


def _not_invariant(preset: Preset, dtype: str) -> str:
    """The end of a half-precision refusal: why, and the dtype to set (float32 alone with a device_map, where auto
    keeps the checkpoint's own dtype: `pretrained._model_kwargs`)."""
    instead = "float32" if preset.device_map else "float32 (or auto)"
    return (f"not batch-invariant in {dtype}: greedy speculative decoding could part from plain decoding at a "
            f"near-tie. Set dtype: {instead} for presets.{preset.name} in {_config(preset)}.")


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")


def read_tokenizer(ref, who: str, **kwargs):
    """`AutoTokenizer.from_pretrained(ref, **kwargs)`. A local folder that holds no tokenizer beside the weights is
    said so, naming it (transformers said only the first line of "Couldn't instantiate the backend tokenizer from one
    of: ...", naming no file and no folder); asked only after transformers failed, since it reads tokenizers from
    files this list lacks (a vocab.txt that config.json's tokenizer_class names). transformers 5 reads a Qwen2 or
    GPT-2 folder without one as a tokenizer of its special tokens alone, which is said the same way: a target's first
    reply failed ('the prompt is empty'), a draft was refused as of another tokenizer ('the draft's has 1 tokens')."""
    from transformers import AutoTokenizer

    none = (f"{who}: the folder {ref} has no tokenizer (no tokenizer.json or tokenizer_config.json): save the "
            "model's tokenizer beside its weights (`tokenizer.save_pretrained(folder)`).")
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref, **kwargs)
    except Exception:
        if Path(ref).is_dir() and not any((Path(ref) / name).exists() for name in _TOKENIZER_FILES):
            raise LoadError(none) from None
        raise
    if not set(tokenizer.get_vocab()) - set(tokenizer.all_special_tokens):  # no token to write text with
        special = ", ".join(tokenizer.all_special_tokens) or "none"
        raise LoadError(none if Path(ref).is_dir() else f"{who}: its tokenizer has no tokens but its special ones "
                        f"({special}): give a model that ships its tokenizer.")
    return tokenizer


def check_causal(model, who: str) -> None:
    """`model` must be a causal language model that keeps a KV cache: position i reads positions up to i only, and a
    forward returns its cache. An encoder named as a model (a BERT folder, which transformers loads as a
    `BertLMHeadModel` reading both ways) loaded and then failed deep in the first reply. Two forwards of two tokens
    that differ only in the second, once a load: a causal model's first position computes the same numbers over the
    same shapes (0.0 apart for SmolLM2 in float32, bfloat16 and float16: the 1e-4 allowed is no per-dtype tolerance),
    a bidirectional one's moves with the second token."""
    import torch

    from specui.kv import model_device

    if model.get_output_embeddings() is None:  # where the engine reads the vocabulary: it failed with AttributeError
        raise LoadError(f"{who} ({type(model).__name__}) names no output layer (its get_output_embeddings() returns "
                        "None), where specui reads the vocabulary it scores: choose a model whose class names it "
                        "(transformers' Llama, Qwen2, Mistral, GPT-2 ...; remote code that defines "
                        "get_output_embeddings)")
    vocab = model.get_input_embeddings().num_embeddings
    device = model_device(model)
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([[0, 1 % vocab]], device=device), use_cache=True)
        other = model(input_ids=torch.tensor([[0, 0]], device=device), use_cache=False).logits[0, 0].float()
    kept = next((whole[key] for key in ("cache", "past_key_values") if key in whole), None)
    first = whole.logits[0, 0].float()
    reads_ahead = vocab > 1 and not torch.allclose(first, other, rtol=1e-4, atol=1e-4 * float(other.abs().max()))
    if kept is None or reads_ahead:
        raise LoadError(f"{who} is not a causal language model ({type(model).__name__}: "
                        f"{'it keeps no KV cache' if kept is None else 'each position reads the tokens after it'}): "
                        "speculative decoding needs a decoder-only model such as Llama, Qwen2 or GPT-2.")


def drop_eos_outside(target) -> None:
    """The target's own eos ids outside its vocabulary (a checkpoint's quirk: `specui.engine_checks.eos_ids` leaves
    them out, in one warning) left out of its generation_config (or config) once, as it loads: every engine built on
    the loaded target (each Teach experiment builds one) then reads the ids in range and says nothing, where each said
    the warning again. Where none is left, None in each config the engine falls back to (not [], on which
    transformers' own generate fails: its pad token is the first eos id). Ids that are no token ids are left to the
    engine, which refuses them by name."""
    from specui.engine_checks import eos_ids

    try:
        kept = eos_ids(None, target, vocab_size=target.get_output_embeddings().weight.shape[0])  # its one warning
    except ValueError:
        return
    for where in ("generation_config", "config"):  # the first that names any, as the engine reads them
        config = getattr(target, where, None)
        found = getattr(config, "eos_token_id", None)
        if found is None:
            continue
        ids = [found] if isinstance(found, int) else list(found)
        if all(i in kept for i in ids):  # an int in range stays an int
            return
        left = [i for i in ids if i in kept]
        config.eos_token_id = left or None  # none left: the config read next is emptied too, as no id ends a run
        if left:
            return
