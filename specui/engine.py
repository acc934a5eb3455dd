"""The speculative decoding engine: rounds of draft-then-verify on transformers causal LMs.

A round, with the target's KV cache holding every token but the last one ("cur"):
    1. the drafter proposes up to K tokens x_1..x_K after the context;
    2. the target scores [cur, x_1..x_K] in one forward: K+1 distributions;
    3. `verify` accepts x_1..x_n and adds one target token (resampled at the rejection, or the bonus);
    4. both caches are trimmed by absolute length to the accepted prefix.
(`specui.chain_round`; `specui.tree_round` for a round that drafts a token tree.)
Plain decoding is the same loop with no drafter: one target forward, one token. Both paths share the
sampler, the cache code and the events, so every comparison runs one code path.

The engine yields `Round` events and never prints, colours or tokenizes anything.
"""

from __future__ import annotations

import inspect
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from specui.drafters import (
    COPIES,
    DRAFTER_NAMES,
    HEAD_DRAFTERS,
    HEAD_OF,
    HEADS,
    MODEL,
    MODEL_DRAFTERS,
    MODEL_LOOKUP,
    PROMPT_LOOKUP,
    Drafter,
    DraftLength,
    ModelDrafter,
    ModelLookupDrafter,
    PromptLookupDrafter,
)
from specui.drafters.base import features_of
from specui.drafters.registry import name_of
from specui.engine_checks import ContextLengthError  # noqa: F401 (where callers import it from)
from specui.chain_round import chain_round, plain_round
from specui.engine_checks import check_context, check_prompt, check_run_arguments, longest_draft
from specui.engine_checks import eos_ids, tokenizer_hint
from specui.events import GenerationResult, Round
from specui.kv import cpu_threads, model_device
from specui.prompt_cache import PromptCache, open_target
from specui.sampling import Generators, Sampling, own_drafter_seed
from specui.settings import TREE_METHODS, DecodeSettings, settings_from, why_no_trees
from specui.tree_round import tree_round
from specui.tree_verify import verify_tree
from specui.turns import Turns
from specui.verify_rule import verify


class SpeculativeEngine:
    """Exact speculative decoding with a target model and an optional draft model.

    Both are transformers causal LMs (anything `AutoModelForCausalLM` loads). Without a draft model
    the engine drafts by prompt lookup. The engine keeps no per-generation state, so one engine can
    serve many generations, one after another, interleaved or from several threads: there, their rounds
    take turns (one round, or one prompt's read, at a time; never held across a yield), so each run's
    output is what it gives alone, and a stream left unfinished holds up no one.
    """

    verify = staticmethod(verify)  # a subclass may swap the rule (the tests do, to prove they can fail)
    verify_tree = staticmethod(verify_tree)  # the same for token trees

    def __init__(self, target_model, draft_model=None, *, eos_token_id: int | Sequence[int] | None = None,
                 heads: dict | None = None, prompt_threads: int | None = None, drafter: str | None = None):
        """heads: drafter name ("eagle", "medusa", "early_exit") -> a head trained on this target
        (`specui.heads`), each with `make_drafter(target_model)`.
        drafter: the drafter a run uses when it names none (`load_engine` gives the preset's); None: the draft
        model when there is one, else prompt lookup.
        prompt_threads: torch's CPU threads while the prompt is read (the target's and the drafter's prefill,
        a matrix-product-bound block that more cores speed up; the rounds keep torch's count). None: torch's
        count throughout."""
        if prompt_threads is not None and (isinstance(prompt_threads, bool) or not isinstance(prompt_threads, int)
                                           or prompt_threads < 1):
            raise ValueError(f"prompt_threads must be a positive integer or None (got {prompt_threads!r})")
        self.prompt_threads = prompt_threads
        self._turns = Turns()  # the rounds of runs on several threads take turns, in order (docs/engine.md: threads)
        if drafter is not None and name_of(drafter) not in DRAFTER_NAMES:
            raise ValueError(f"drafter must be one of {', '.join(DRAFTER_NAMES)} or None (got {drafter!r})")
        self.default_drafter = drafter = None if drafter is None else name_of(drafter)  # a label ("EAGLE") as its name
        for role, model in (("target_model", target_model), ("draft_model", draft_model or target_model)):
            if not callable(getattr(model, "get_output_embeddings", None)):
                raise ValueError(f"{role} must be a transformers causal LM (e.g. AutoModelForCausalLM.from_pretrained"
                                 f"(...)), not a {type(model).__name__}")
        # a run built from keywords alone takes these settings for its drafter where the keywords leave them out
        # (`load_engine`: the preset's K and draft confidence); (name, keywords) -> {field: value}, None: the defaults
        self.tuning: Callable[[str, dict], dict] | None = None
        self.target_model = target_model.eval()
        self.heads = dict(heads or {})
        for name, head in self.heads.items():
            if name not in HEADS or not callable(getattr(head, "make_drafter", None)):
                raise ValueError(f"heads: {name!r} is not one of {', '.join(HEADS)} with a make_drafter method")
        # the target states any head reads: a conversation's cache logs them, for whichever drafts next turn
        self.head_features = tuple(i for head in self.heads.values() for i in getattr(head, "fuse_layers", None)
                                   or getattr(head, "feature_layers", None) or ())
        self.draft_model = draft_model.eval() if draft_model is not None else None
        if drafter is not None and drafter not in self.drafters:
            lacks = "draft model" if drafter in MODEL_DRAFTERS else f"{HEAD_OF[drafter]} head"
            raise ValueError(f"drafter={drafter!r} cannot be this engine's default: it has no {lacks} (its drafters: "
                             f"{', '.join(self.drafters)})")
        self.device = model_device(target_model)
        self.vocab_size = target_model.get_output_embeddings().weight.shape[0]
        if draft_model is not None:
            draft_vocab = draft_model.get_output_embeddings().weight.shape[0]
            if draft_vocab > self.vocab_size:  # a draft may propose only ids the target scores
                raise ValueError(
                    f"The draft model's output layer has {draft_vocab} rows, the target's {self.vocab_size}: the "
                    f"draft could propose ids {self.vocab_size} to {draft_vocab - 1}, which the target has no row "
                    f"for. If the draft shares the target's tokenizer and its matrices are only padded past it "
                    f"(checkpoints pad to a multiple of 64 or 128), cut them first: "
                    f"draft_model.resize_token_embeddings({self.vocab_size}) (specui.load_engine does so for a "
                    f"preset's draft); a draft of another tokenizer cannot draft for this target.")
        self.eos_token_ids = eos_ids(eos_token_id, target_model, vocab_size=self.vocab_size)

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafter names this engine can draft with ("model" needs a draft model, a head its head)."""
        return (MODEL_DRAFTERS if self.draft_model is not None else ()) \
            + tuple(d for d in HEAD_DRAFTERS if HEAD_OF[d] in self.heads) + (PROMPT_LOOKUP,)

    def __repr__(self) -> str:
        """One line a notebook shows: the preset (from `load_engine`), the models, their device and the drafters."""
        if "device" not in vars(self):  # an __init__ that refused its arguments: a debugger's `self` (%debug, pdb)
            return "SpeculativeEngine(not built: its __init__ raised)"
        def named(model) -> str:  # its class, and the folder it came from where it has one
            where = Path(getattr(model, "name_or_path", "") or "").name
            return "None" if model is None else type(model).__name__ + (f"({where!r})" if where else "")
        preset = getattr(self, "preset", None)
        return (f"SpeculativeEngine({f'preset={preset.name!r}, ' if preset is not None else ''}"
                f"target={named(self.target_model)}, draft={named(self.draft_model)}, device={self.device}, "
                f"drafters={self.drafters})")

    def generate(self, input_ids: Sequence[int], settings: DecodeSettings | None = None, *,
                 into: GenerationResult | None = None, **keywords) -> GenerationResult:
        """Decode one prompt to the end: a `GenerationResult` with every new token, its provenance and every round.

        input_ids: one prompt's token ids (a list, a 1-D or [1, n] tensor, or what `engine.tokenizer` returns, as
        `enc` or as transformers' generate takes it, `**enc`; unpadded).
        settings: a `DecodeSettings`, or its fields as keywords [default]: max_new_tokens [64], temperature [0: greedy,
        the target's own output token for token], top_k [0: off], top_p [1: off], repetition_penalty [1: off], seed
        [None: a fresh one, in `result.seed`], drafter [None: the engine's; `engine.drafters` lists the names],
        num_draft_tokens [K: 4, or the preset's from `load_engine`], speculative [True; False: plain decoding].
        into, draws, cache, eos_token_id and the rest: help(engine.stream), which yields the same rounds one at a time.
        Raises ValueError (ContextLengthError for a prompt that does not fit) before any work."""
        result = into if into is not None else GenerationResult()
        for _ in self.stream(input_ids, settings, into=result, **keywords):
            pass
        return result

    def stream(self, input_ids: Sequence[int], settings: DecodeSettings | None = None, *,
               into: GenerationResult | None = None, draws: Generators | None = None, cache: PromptCache | None = None,
               eos_token_id: int | Sequence[int] | None = None, **keywords) -> Iterator[Round]:
        """Yield one `Round` as each round is decided.

        settings: a `DecodeSettings`; keywords (its field names: max_new_tokens, num_draft_tokens,
                  temperature, top_k, top_p, repetition_penalty, seed, speculative, ignore_eos, drafter, adaptive,
                  tree_width, tree_nodes, draft_confidence) build one, or change the one given. Built from keywords
                  alone, it takes the engine's `tuning` where they leave a field out (`load_engine`'s engine: the
                  preset's K and draft confidence for the run's drafter), else DecodeSettings' defaults.
        drafter: "model" (the draft model; the default when there is one and the engine names no default
                 drafter of its own), "model_lookup" (copies where the context repeats, the draft model
                 elsewhere), "prompt_lookup" (the default without a draft model), a head's name,
                 "early_exit_lookup" (copies, the early-exit head elsewhere), or any object with the
                 `Drafter` methods.
        into: a fresh `GenerationResult` to fill as the rounds come (tokens, seed, timings, stop reason);
              one that already holds a run is refused (make a new one per run).
        draws: the `Generators` the target's draws (uniforms, resampled and bonus tokens) come from, advanced
               in place; by default fresh ones seeded with the run's seed. A `copy()` of another run's, taken
               between two of its rounds, replays that run's draws from there (`specui.lesson_compare`).
        cache: a conversation's `PromptCache`: the run reads only the prompt's tokens after what the cache holds
               (a chat's earlier turns), and leaves its own there for the next (`specui.prompt_cache`).
        eos_token_id: the token id (or ids) that end this run, in place of the engine's `eos_token_ids` (None: the
                      engine's, which `load_engine` takes from the target's generation config); ignore_eos=True: none.
        Raises ValueError (ContextLengthError for a prompt that does not fit) before any work.
        """
        if settings is None and self.tuning:  # the engine's tuning for the run's drafter, where keywords leave it
            name = self._drafter_name(keywords.get("drafter"))
            keywords = {**self.tuning(name, keywords), **keywords} if isinstance(name, str) else keywords
        if "attention_mask" in keywords:  # engine.generate(**tokenizer(text)), as transformers' generate is called
            input_ids = {"input_ids": input_ids, "attention_mask": keywords.pop("attention_mask")}
        settings = settings_from(settings, keywords)
        check_run_arguments(into=into, draws=draws, cache=cache)
        prompt = check_prompt(input_ids, self.vocab_size, tokenizer=tokenizer_hint(self))
        ends = self.eos_token_ids if eos_token_id is None else \
            eos_ids(eos_token_id, self.target_model, vocab_size=self.vocab_size, none_means="the engine's")
        sampling = Sampling(temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                            repetition_penalty=settings.repetition_penalty)
        drafter = self._make_drafter(settings.drafter) if settings.speculative else None
        if hasattr(drafter, "stop_below"):  # drafters that draw from distributions stop when unsure (`Confidence`)
            drafter.stop_below = settings.draft_confidence
        tree = (settings.tree_width, settings.tree_nodes) if settings.tree_width > 1 and drafter is not None else None
        if tree and not all(callable(getattr(drafter, m, None)) for m in TREE_METHODS):
            name = getattr(drafter, "name", type(drafter).__name__)
            raise ValueError(f"drafter {name!r} cannot draft token trees ({why_no_trees(name)}); use tree_width=1")
        check_context(len(prompt), settings.max_new_tokens, target=self.target_model,
                      draft=drafter.model if isinstance(drafter, ModelDrafter) else None)
        seed = secrets.randbits(63) if settings.seed is None else settings.seed
        result = into if into is not None else GenerationResult()
        result.seed, result.speculative = seed, settings.speculative
        schedule = DraftLength(settings.num_draft_tokens, adaptive=settings.adaptive)
        generators = draws if draws is not None else Generators(seed, home=self.device)
        # the target draws from a generator seeded with `seed`: a drafter of one's own that seeds its generator with
        # the seed `start` gives it (as the protocol says) gets one of its own, or each draft would be judged by the
        # draw that drafted it (tests/engine/test_drafter_stream.py); the engine's drafters derive their own from it
        own = settings.speculative and not isinstance(self._drafter_name(settings.drafter), str)
        drafter_seed = own_drafter_seed(seed) if own else seed
        return self._rounds(prompt, sampling, drafter, drafter_seed, result, max_new_tokens=settings.max_new_tokens,
                            schedule=schedule, ends=frozenset() if settings.ignore_eos else ends, tree=tree,
                            generators=generators, cache=cache)

    # -- the loop ------------------------------------------------------------------------------------

    def _rounds(self, prompt, sampling, drafter, drafter_seed, result, *, max_new_tokens, schedule, ends, generators,
                tree=None, cache=None):
        started = time.perf_counter()  # the generators draw on the device of what they sample
        features = features_of(drafter)
        context, begun = list(prompt), []  # begun: the drafter once its start returned (it has a state to keep)
        with (alive := threading.Lock()):  # the cache's holder, released in C however the run ends (`_settle`)
            try:  # the cache is given back whatever happens (Ctrl-C included, before open_target's value arrives)
                target, reused, states, held = open_target(cache, self.target_model, prompt, features,
                                                           self.head_features, holder=alive)
                resume = held.resume(prompt, reused) if held is not None and _resumes(drafter) else None
                yield from self._run(target, reused, states, prompt, context, sampling, drafter, features,
                                     drafter_seed, result, started, max_new_tokens=max_new_tokens, schedule=schedule,
                                     ends=ends, generators=generators, tree=tree, resume=resume, begun=begun)
            finally:  # a drafter cut short before its start returned leaves no kept state (`PromptCache.resume`)
                if cache is not None and cache.holds(alive):
                    cache.close(context, begun[0] if begun else None)

    def _run(self, target, reused, states, prompt, context, sampling, drafter, features, drafter_seed, result,
             started, *, max_new_tokens, schedule, ends, generators, tree, resume=None, begun=None):
        result.reused_tokens = reused
        threads = self.prompt_threads if self.device.type == "cpu" else None
        asked = time.perf_counter()
        place, mark = self._turns.place()
        with mark, place, self._turns.take(place, mark), torch.inference_mode(), cpu_threads(threads):
            # none is held across a yield: the consumer may run on another thread, and other runs' rounds go on
            waited = time.perf_counter() - asked  # another thread's turn: in total_s, not in this prompt's reading
            if len(prompt) - 1 > reused:  # the last prompt token opens round 1
                out = target.extend(prompt[reused:-1], last_only=True, features=features, prompt=True)
                if features:
                    states = out[1] if states is None else torch.cat([states.to(out[1].device), out[1]])
            if drafter is not None:
                extra = {"features": states} if features else {}
                if getattr(drafter, "shares_target", False):
                    extra["target"] = target
                if resume is not None:  # the drafter's own cache of the conversation's earlier turns
                    extra["resume"] = resume
                drafter.start(prompt, sampling=sampling, seed=drafter_seed, **extra)
                if begun is not None:
                    begun.append(drafter)
            self._sync()
        result.prefill_s = time.perf_counter() - started - waited

        while len(result.token_ids) < max_new_tokens:
            remaining = max_new_tokens - len(result.token_ids)
            place, mark = self._turns.place()
            with mark, place, self._turns.take(place, mark), torch.inference_mode():
                if drafter is None:
                    round_ = plain_round(self, target=target, context=context, sampling=sampling,
                                         generators=generators)
                else:
                    k = min(schedule.k, remaining - 1)  # a round emits at most k+1 tokens
                    if tree is not None:  # a tree drafter drafts nothing for k = 0: the round is the bonus alone
                        round_ = tree_round(self, target=target, drafter=drafter, context=context, k=k,
                                            width=tree[0], nodes=tree[1], sampling=sampling, generators=generators)
                    else:
                        round_ = chain_round(self, target=target, drafter=drafter, context=context, k=k,
                                             sampling=sampling, generators=generators,
                                             limit=min(longest_draft(drafter, k), remaining - 1))
                    if not round_.copied:  # a copy says nothing about how far the draft model guesses well
                        schedule.update(num_accepted=round_.num_accepted, num_drafted=round_.num_drafted)
            round_ = _cut_at_eos(round_, ends)
            round_ = replace(round_, index=len(result.rounds), elapsed_s=time.perf_counter() - started)
            context.extend(round_.token_ids)
            result.add(round_)
            stop = round_.token_ids[-1] in ends  # ends: the run's eos ids (none with ignore_eos)
            if stop or len(result.token_ids) >= max_new_tokens:
                result.stop_reason = "eos" if stop else "length"
            yield round_
            if stop:
                return

    # -- checks and helpers ----------------------------------------------------------------------------

    def _drafter_name(self, drafter):
        """The drafter a run's `drafter` setting means (None: the engine's default)."""
        if drafter is None:
            return self.default_drafter or (MODEL if self.draft_model is not None else PROMPT_LOOKUP)
        return name_of(drafter) if isinstance(drafter, str) else drafter  # a label ("prompt lookup") as its name

    def _make_drafter(self, drafter) -> Drafter:
        drafter = self._drafter_name(drafter)
        if drafter in MODEL_DRAFTERS:
            if self.draft_model is None:
                raise ValueError(f"drafter={drafter!r} needs a draft model; this engine has none "
                                 f"(use {PROMPT_LOOKUP!r})")
            return (ModelLookupDrafter if drafter == MODEL_LOOKUP else ModelDrafter)(self.draft_model)
        if drafter == PROMPT_LOOKUP:
            return PromptLookupDrafter()
        if drafter in HEAD_OF:
            head = HEAD_OF[drafter]
            if head not in self.heads:
                have = ", ".join(repr(d) for d in self.drafters)
                raise ValueError(f"drafter={drafter!r} needs a trained {head} head for this target; this engine has "
                                 f"none (its drafters: {have}; a preset's heads: list attaches them)")
            return self.heads[head].make_drafter(self.target_model, **({"copies": True} if drafter in COPIES else {}))
        return drafter  # a Drafter object (DecodeSettings refused unknown names)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _sync_time(self, since: float) -> float:
        self._sync()
        return time.perf_counter() - since


def _resumes(drafter) -> bool:
    """Whether a drafter keeps its own cache for a conversation's next turn (`keep`, `start(resume=)`)."""
    if not callable(getattr(drafter, "keep", None)):
        return False
    try:
        return "resume" in inspect.signature(drafter.start).parameters
    except (TypeError, ValueError):
        return False


def _cut_at_eos(round_: Round, ends: frozenset[int]) -> Round:
    """An EOS inside a block ends the generation there: drop what the round emitted after it.

    `num_accepted` stays what the target's check accepted (drafts after the EOS included), the count the acceptance
    rate and `metrics.fitted_alpha` read; the emitted tokens, which the mean accepted length reads, stop at the EOS."""
    if not ends:
        return round_
    for j, token in enumerate(round_.token_ids[:-1]):
        if token in ends:
            keep = j + 1
            return replace(round_, token_ids=round_.token_ids[:keep], kinds=round_.kinds[:keep],
                           token_target_probs=round_.token_target_probs[:keep],
                           token_draft_probs=round_.token_draft_probs[:keep])
    return round_
