"""`python -m specui.bench --turns N`: a conversation, each turn decoded afresh and with the conversation's cache.

Turn t's prompt is the conversation so far (the earlier prompts and their answers, as the tokens the model
wrote) and the t-th prompt: a user message in the chat template for a chat preset, else the next prompt's
tokens appended. Each turn is
decoded by the preset's drafter, afresh (the whole conversation read as the prompt) and with a
`PromptCache` (only the tokens after what the earlier turns left in it), interleaved fresh, cached, fresh,
cached …; every cached repeat reads the same new tokens (the cache's `limit`). Answers stop at EOS. The
report gives, per turn, the prompt's length, the tokens the cache kept, the median time to the first token
(the prompt and the first round; the prompt alone in the JSON) and the median turn time of each, their
ratios, and whether the tokens were identical. Ctrl-C after a turn or more keeps the turns measured (the report says
it was interrupted after how many), and so does a conversation that outgrows the target's context (the report says at
which turn).
"""

from __future__ import annotations

from specui import metrics
from specui.bench.report import run_line, run_size, sampling_mode
from specui.engine import ContextLengthError
from specui.prompt_cache import PromptCache, answer_ids, chat_ids
from specui.text import fmt


def turn_prompt(tokenizer, texts: list[str], answers: list[list[int]], ids_so_far: list[int], *,
                chat: bool) -> list[int]:
    """The prompt of turn len(answers): the chat so far (each answer as the tokens the model wrote:
    `chat_ids`) and texts[len(answers)] (chat), else the tokens so far and the next text's."""
    if chat:
        messages = []
        for text, answer in zip(texts, answers):
            messages += [{"role": "user", "content": text},
                         {"role": "assistant", "content": tokenizer.decode(answer, skip_special_tokens=True),
                          "token_ids": answer, "ids_of": "this"}]
        return chat_ids(tokenizer, [*messages, {"role": "user", "content": texts[len(answers)]}], ids_of="this")
    return ids_so_far + list(tokenizer(texts[len(answers)], add_special_tokens=not ids_so_far)["input_ids"])


def run_conversation(engine, tokenizer, texts: list[str], settings, *, repeats: int, warmup: int, chat: bool,
                     progress=None) -> dict:
    """Figures of a conversation of len(texts) turns (see the module docstring)."""
    settings = settings.but(ignore_eos=False)
    cache, answers, so_far, turns, ended = PromptCache(), [], [], [], {}
    try:  # Ctrl-C after a turn or more ends the conversation with those (the report says so)
        for t in range(len(texts)):
            prompt = turn_prompt(tokenizer, texts, answers, so_far, chat=chat)
            if t == 0:
                for _ in range(warmup):
                    engine.generate(prompt, settings)
            cache.limit = cache.reusable(prompt, engine.target_model)
            fresh, cached = [], []
            for _ in range(repeats):
                fresh.append(engine.generate(prompt, settings))
                cached.append(engine.generate(prompt, settings, cache=cache))
            cache.limit = None
            answer = cached[0].token_ids
            turns.append(_turn(t + 1, prompt, fresh, cached, greedy=settings.greedy))  # whole, or not at all
            answers.append(answer_ids(cached[0]))
            so_far = prompt + answer
            if progress is not None:
                progress(t + 1, len(texts))
    except KeyboardInterrupt:
        if not turns:
            raise
        ended = {"interrupted": f"after {len(turns)} of {len(texts)} turns"}
    except ContextLengthError as e:  # the conversation outgrew the target: the turns that fitted are kept
        if not turns:
            raise
        ended = {"outgrew_context": f"turn {len(turns) + 1} of {len(texts)}, the conversation so far ({len(prompt)} "
                                    f"tokens) and up to {settings.max_new_tokens} new ones, outgrows the target's "
                                    f"context of {e.limit} tokens"}
    fresh_total, cached_total = sum(x["fresh_turn_s"] for x in turns), sum(x["cached_turn_s"] for x in turns)
    return {"turns": turns, "fresh_total_s": fresh_total, "cached_total_s": cached_total,
            "conversation_ratio": _ratio(fresh_total, cached_total), **ended}


def _turn(number: int, prompt: list[int], fresh: list, cached: list, *, greedy: bool) -> dict:
    """One turn's figures: the medians of its fresh and cached runs, their ratios, and whether the tokens agreed."""
    answer = cached[0].token_ids
    turn = {"turn": number, "prompt_tokens": len(prompt), "kept_tokens": cached[0].reused_tokens,
            "new_tokens": len(answer),
            "fresh_prompt_s": metrics.median([r.prefill_s for r in fresh]),
            "cached_prompt_s": metrics.median([r.prefill_s for r in cached]),
            "fresh_first_token_s": metrics.median([r.rounds[0].elapsed_s for r in fresh]),
            "cached_first_token_s": metrics.median([r.rounds[0].elapsed_s for r in cached]),
            "fresh_turn_s": metrics.median([r.total_s for r in fresh]),
            "cached_turn_s": metrics.median([r.total_s for r in cached]),
            "identical": all(r.token_ids == answer for r in fresh + cached) if greedy else None}
    return {**turn, "first_token_ratio": _ratio(turn["fresh_first_token_s"], turn["cached_first_token_s"]),
            "turn_ratio": _ratio(turn["fresh_turn_s"], turn["cached_turn_s"])}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def format_conversation(r: dict) -> str:
    """The report of `run_conversation` as a text table, under the run's header lines."""
    mode = sampling_mode(r)
    lines = [(f"specui bench --turns: preset {r['preset']}, drafter {r['drafter']}, {mode}, up to "
              f"{r['max_new_tokens']} new tokens a turn (stops at EOS), "
              f"{run_size(len(r['turns']), r['repeats'], 'turn')}"),
             f"device: {r['device']}, torch {r['torch_version']}, {r['torch_threads']} thread(s)", run_line(r), "",
             "turn  prompt  kept  new | first token s: fresh  cached  ratio | turn s: fresh  cached  ratio | identical"]
    for x in r["turns"]:
        same = {True: "yes", False: "NO", None: "–"}[x["identical"]]
        lines.append(f"{x['turn']:>4}  {x['prompt_tokens']:>6}  {x['kept_tokens']:>4}  {x['new_tokens']:>3} | "
                     f"{fmt(x['fresh_first_token_s'], '.3f'):>20}  {fmt(x['cached_first_token_s'], '.3f'):>6}  "
                     f"{fmt(x['first_token_ratio'], '.2f×'):>5} | {fmt(x['fresh_turn_s'], '.2f'):>13}  "
                     f"{fmt(x['cached_turn_s'], '.2f'):>6}  {fmt(x['turn_ratio'], '.2f×'):>5} | {same}")
    total = (f"whole conversation: {fmt(r['fresh_total_s'], '.2f')} s fresh, {fmt(r['cached_total_s'], '.2f')} s "
             f"with the cache ({fmt(r['conversation_ratio'], '.2f×')})")
    lines += ["", total]
    if r.get("outgrew_context"):
        lines.append(f"STOPPED: {r['outgrew_context']}")
    return "\n".join(lines)
