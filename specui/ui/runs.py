"""What one request of the showcase produced: `Run` (its results, token views and state as it goes), `Frame` (what
the page shows at one moment) and `reply` (a run's reply as the conversation keeps it); `streams`, the engine runs
that fill a `Run` (speculative, then plain in compare mode, or the arena's contestants), each opened when its turn
comes. `specui.ui.session` drives them; the chat's handlers, the API and the arena view read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specui import arena, runstats
from specui.events import GenerationResult, Kind
from specui.prompt_cache import answer_ids
from specui.text import left_out_note
from specui.ui.request import Settings

# a stopped reply's note: its mark a square that Debian's own fonts draw (DejaVu, Liberation: U+25A0), where U+23F9 (⏹)
# is in none of them and showed as an empty box in its Chromium
STOPPED = "\u25a0 stopped"


@dataclass
class Frame:
    """What the page shows at one moment; None fields are left as they are."""

    message: str  # the assistant's message (HTML)
    stats: str  # the stats line (HTML)
    figures: dict | None = None  # element id -> plotly figure, when due
    race: str | None = None  # the race replay (HTML), once both runs are done
    table: list | None = None  # arena mode: the table's rows, when due
    done: bool = False
    error: str | None = None


@dataclass
class Run:
    """Everything one request produced so far."""

    settings: Settings
    spec: GenerationResult = field(default_factory=GenerationResult)
    plain: GenerationResult | None = None
    spec_views: list = field(default_factory=list)
    plain_views: list = field(default_factory=list)
    phase: str = "speculative"  # speculative | plain | arena | done | stopped
    error: str | None = None
    arena: dict = field(default_factory=dict)  # arena mode: contestant name -> its GenerationResult
    arena_views: dict = field(default_factory=dict)  # contestant name -> its token views
    contestant: str = ""  # arena mode: the one decoding now
    skipped: tuple = ()  # arena mode: the drafters left out (token trees: those that cannot draft them)
    arena_ks: dict = field(default_factory=dict)  # arena mode: the drafters' own K (the preset's drafter_tokens)
    arena_confidences: dict = field(default_factory=dict)  # and their own draft_confidence (the preset's)
    trees: dict = field(default_factory=dict)  # round index -> its `TreeRecord`: the speculative run's tree rounds
    preset: str = ""  # the preset's name, once it is known
    left_out: int = 0  # a chat's history messages left out of this turn, oldest first: they no longer fit
    context: int = 0  # the context they did not fit (tokens)
    reading: int = 0  # the prompt's tokens the run reads (those no kept conversation cache holds)
    spec_charts: tuple | None = None  # (the speculative run's rounds, its charts): kept by `chat_view.all_figures`

    @property
    def reply_text(self) -> str:
        """The reply the conversation keeps: the speculative run's, or in arena mode plain decoding's."""
        if self.settings.arena:
            return reply(self.arena_views.get(arena.PLAIN, ()), self.arena.get(arena.PLAIN))
        return self.spec_text

    @property
    def replied(self) -> GenerationResult | None:
        """The run whose reply the conversation keeps: the speculative one, or in arena mode plain decoding's."""
        return self.arena.get(arena.PLAIN) if self.settings.arena else self.spec

    def reply_message(self) -> dict:
        """The reply as the conversation keeps it: its text, and the tokens the model wrote (`chat_ids`)."""
        result = self.replied
        ids = [] if result is None else answer_ids(result)
        return {"role": "assistant", "content": self.reply_text, "token_ids": ids, "ids_of": self.preset}

    @property
    def left_out_note(self) -> str:
        """The note that leads the reply when a chat's oldest messages were left out of this turn ("" when none were):
        known before its first token, it is the message's start from its first frame on (`render_reply`'s lead)."""
        return left_out_note(self.left_out, self.context)  # the terminal's --chat says it too

    @property
    def spec_text(self) -> str:
        return reply(self.spec_views, self.spec)

    @property
    def plain_text(self) -> str:
        return reply(self.plain_views, self.plain)

    @property
    def identical(self) -> bool | None:
        if self.plain is None or self.phase != "done" or not self.settings.greedy:
            return None
        return self.spec.token_ids == self.plain.token_ids

    def stats(self):
        # Theorem 3.8 at the K chosen: the run's own (the K most of its rounds asked for) is less where the token
        # budget cut every round short (K 64 and 64 new tokens: 63 drafts at most in the first round)
        k = None if self.settings.adaptive else self.settings.num_draft_tokens
        spec = runstats.run_stats(self.spec, plain=self.plain, k=k) if self.spec.rounds else None
        plain = runstats.run_stats(self.plain) if self.plain is not None and self.plain.rounds else None
        return spec, plain

    def as_dict(self) -> dict:
        """The API's answer."""
        spec, plain = self.stats()
        # arena mode: plain decoding's reply, its stop reason and the seed every contestant took
        replied = self.replied or GenerationResult()
        return {
            "text": self.reply_text,
            "tokens": [{"id": v.token_id, "text": v.text, "kind": v.kind, "p": v.p, "q": v.q, "accept": v.accept}
                       for v in self.spec_views if v.kind != Kind.REJECTED],
            "stats": spec.as_dict() if spec else None, "stop_reason": replied.stop_reason, "seed": replied.seed,
            "plain_text": self.plain_text if self.plain is not None else None,
            "plain_stats": plain.as_dict() if plain else None,
            "speedup": runstats.speedup(spec, plain) if spec else None, "identical": self.identical,
            "stopped": self.phase == "stopped",
        }


def reply(views, result: GenerationResult | None) -> str:
    """A run's reply as text: its tokens' (drafts the target rejected left out), without the end-of-text token
    that closed it. The token views still show that token; a conversation or an API client gets the reply alone
    (its text would be read back as one more end-of-text token by a chat template)."""
    shown = [v for v in views if v.kind != Kind.REJECTED]
    if shown and result is not None and result.stop_reason == "eos":
        shown.pop()
    return "".join(v.text for v in shown)


def streams(run: Run, engine, ids, preset, cache=None):
    """(phase, result, views, engine stream) per run of the request, each opened only when its turn
    comes; the first is opened now, so bad settings raise ValueError before any work. cache: the
    conversation's `PromptCache` (the arena runs without one)."""
    settings = run.settings
    if settings.arena:
        run.skipped = arena.skipped(engine, settings.decode)
        # drafters with their own K (and draft_confidence) race at it
        run.arena_ks, run.arena_confidences = ks, confidences = (dict(preset.drafter_tokens),
                                                                  dict(preset.draft_confidence))
        return _arena_streams(run, arena.streams(engine, ids, settings.decode, into=run.arena, ks=ks,
                                                 confidences=confidences))
    first = engine.stream(ids, settings.decode.but(speculative=True), into=run.spec, cache=cache)
    return _spec_then_plain(run, engine, ids, first, cache)


def _spec_then_plain(run: Run, engine, ids, first, cache):
    if cache is not None and run.settings.compare:  # both runs read the new turn alike, and pay for it alike
        cache.limit = cache.reusable(ids, engine.target_model)
    try:
        yield "speculative", run.spec, run.spec_views, first
        if run.settings.compare:
            run.plain = GenerationResult()
            # the same seed, even when the first run drew one
            plain = run.settings.decode.but(speculative=False, seed=run.spec.seed)
            yield "plain", run.plain, run.plain_views, engine.stream(ids, plain, into=run.plain, cache=cache)
    finally:
        if cache is not None:
            cache.limit = None


def _arena_streams(run: Run, named):
    for name, stream in named:
        run.contestant = name
        yield "arena", run.arena[name], run.arena_views.setdefault(name, []), stream
