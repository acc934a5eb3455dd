"""The `asked` prompt set: questions and Python requests the target writes itself, each about a word of its vocabulary.

The project's other prompt sets are a few thousand prompts over a few hundred subjects, and the drafts learn
their answers far better than the target's ways in general: teacher-forced, the shipped EAGLE head agrees
with the target on 0.65-0.84 of the answers to 16 prompts of each training set, and on 0.64 of the held-out
ones (the draft model: 0.56-0.80 against 0.54). More answers to the same prompts moved the held-out figures
little. This set widens the subjects instead. Each prompt starts from a seed word drawn from the target's
own vocabulary (whole lower-case words of 6-12 letters: some 14,700), which the target is asked to turn into
one question a curious person might ask or, for two words in three, into one short request for a Python
function (the held-out prompts are half chat, half code, and requests come out unusable more often). What it writes is cleaned up and kept only where it reads
as such a prompt (`extract`); no held-out subject appears in any.

    python -m specui.train.chat --write-answers DIR --prompt-set asked [--asked 2000] [--sample --sample-seed S]

writes the prompts once to DIR/prompts.txt (a resumed writer reads them from there), then the target's
answers to them as for any set. The words are drawn by --seed plus --sample-seed, so each sampled round of
`tools.gpu_round` asks about new words.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import torch

from specui import chat_prompts
from specui.train.chat_data import SAMPLED, generate_chat

ASK = {"chat": "Write one question that a curious person might ask about {word}. Reply with the question only.",
       "code": "Write one short request that asks for a Python function involving {word}. Reply with the request only."}
REQUEST_OPENINGS = ("write", "please", "provide", "create", "can you", "could you", "i need", "implement", "i want",
                    "i'm looking for", "i would like", "i'd like", "design", "develop", "generate", "make")
NOT_A_PROMPT = ("help you", "here to help", "assist", "i'm ready", "i am ready", "request", "question", "curious",
                "delightful", "as an ai")  # offers of help, and questions about the question
QUESTION_WRITTEN = re.compile(r"^(?:(?:the |my |a |your )?(?:question|request|prompt)\s*:\s*)", re.IGNORECASE)


def seed_words(tok, seed: int) -> list[str]:
    """The tokenizer's whole lower-case words of 6-12 letters (a leading space marks a word's start), shuffled."""
    words = sorted({t[1:] for t in tok.get_vocab() if t[:1] in ("Ġ", "▁") and t[1:].isascii() and t[1:].isalpha()
                    and t[1:].islower() and 6 <= len(t) - 1 <= 12})
    random.Random(seed).shuffle(words)
    return words


def extract(text: str, kind: str) -> str | None:
    """The prompt in what the target wrote when asked for a `kind` ("chat": a question; "code": a request for a
    Python function), or None where it wrote something else: an offer of help, code, its instruction echoed,
    an unfinished sentence or a held-out subject."""
    quoted = [q.strip() for q in re.findall(r'"([^"]+)"', text)]
    text = next((q for q in quoted if len(q) >= 15), text.strip()).strip("'\" ")
    text = QUESTION_WRITTEN.sub("", text).strip("'\" ")
    lower = text.lower()
    if "\n" in text or "`" * 3 in text or not 15 <= len(text) <= 240 or len(text.split()) < 4:
        return None
    if any(phrase in lower for phrase in NOT_A_PROMPT):
        return None
    if kind == "chat" and not text.endswith("?"):
        return None
    if kind == "code" and not (lower.startswith(REQUEST_OPENINGS) and ("function" in lower or "python" in lower)
                               and text.endswith((".", "?"))):
        return None
    if any(subject.lower() in lower for subject in chat_prompts.HELD_OUT_SUBJECTS):
        return None
    return text


def asked_prompts(target, tok, *, count: int, seed: int, device: str, batch: int = 64, folder: Path | None = None,
                  log=print) -> list[str]:
    """`count` prompts the target wrote (fewer if the words run out), distinct and in the order written; kept in
    `folder`/prompts.txt and read from there when it exists, so a writer resumes on the same prompts."""
    path = folder / "prompts.txt" if folder else None
    if path and path.exists():
        return path.read_text(encoding="utf-8").splitlines()
    words, kept, asked = seed_words(tok, seed), {}, 0
    for start in range(0, len(words), batch):
        chunk = words[start:start + batch]
        kinds = ["chat" if (start + i) % 3 == 0 else "code" for i in range(len(chunk))]  # requests are kept less often
        torch.manual_seed(seed + start)
        _, sequences, width, spans = generate_chat(target, tok, [ASK[k].format(word=w) for k, w in zip(kinds, chunk)],
                                                   device=device, max_new=64, **SAMPLED)
        for i, ((pad, n), kind) in enumerate(zip(spans, kinds)):
            prompt = extract(tok.decode(sequences[i, width:width + n], skip_special_tokens=True), kind)
            if prompt:
                kept.setdefault(prompt, None)
        asked += len(chunk)
        log(f"asked about {asked} words: {len(kept)} prompts kept")
        if len(kept) >= count:
            break
    prompts = list(kept)[:count]
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".tmp").write_text("\n".join(prompts) + "\n", encoding="utf-8")
        path.with_suffix(".tmp").rename(path)
    return prompts
