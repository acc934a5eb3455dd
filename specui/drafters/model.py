"""The draft-model drafter: a small causal LM proposes k tokens, sampled from the q it reports."""

from __future__ import annotations

import torch

from specui import native
from specui.drafters.base import Confidence, Draft
from specui.drafters.tree import DraftTree, frontier_seen, grow
from specui.kv import CachedLM, model_device
from specui.native_chain import DecoderChain, picks, uniforms
from specui.sampling import Generators, Sampling, argmax, choose, logits_to_probs, mark, penalize_seen, seen_mask


class ModelDrafter:
    """A small causal LM drafts k tokens autoregressively, sampling each from the q it reports.

    Its KV cache holds a prefix of the context. After a round, `observe` rolls it back to the
    accepted tokens; the next `propose` feeds whatever it has not seen yet (the round's last token,
    and after a fully accepted block also the last draft token, which it never fed itself).
    Trees (`propose_tree`, `specui.drafters.tree`): one draft forward per depth over the nodes it
    expands (`CachedLM.extend_tree`); `observe_tree` keeps the accepted path's keys and values.
    """

    name = "draft model"
    trusted_q = True  # its q is a softmax it drew from: the engine skips its per-round check of q
    stop_below = 0.0  # a round stops drafting once the draft's confidence falls below this (`Confidence`)

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.device = model_device(model)
        self.vocab_size = model.get_input_embeddings().num_embeddings
        # A draft with a reduced output vocabulary (specui.chat_draft) maps its rows to the target's ids;
        # q is scattered onto the full vocabulary, zero for the ids it never proposes.
        token_ids = getattr(model, "token_ids", None)
        self.token_ids = None if token_ids is None else token_ids.to(self.device)
        out = model.get_output_embeddings()  # a repetition penalty's mask covers every id a row of it can be
        self._ids_size = max(self.vocab_size, 0 if out is None else out.weight.shape[0],
                             0 if token_ids is None else int(token_ids.max()) + 1)

    def _visible(self, ids: list[int]) -> list[int]:
        # A draft with a smaller vocabulary (e.g. Qwen2.5-0.5B under 7B) cannot embed the target's extra
        # ids; it sees its last id instead. That can only cost acceptance, never exactness.
        return [min(t, self.vocab_size - 1) for t in ids]

    def start(self, prompt: list[int], *, sampling: Sampling, seed: int, resume: dict | None = None) -> None:
        """resume: a conversation's cache's `keep()` of an earlier turn, with "pairs": how many leading tokens
        of the prompt it still holds (`specui.prompt_cache`): the draft reads only the tokens after them."""
        self.sampling = sampling
        # Its own generators, one per device its logits land on (the draft may sit elsewhere than the target).
        self.generators = Generators(seed ^ 0x5DEECE66D, home=self.device)
        self.lm = None  # `keep()` holds nothing until the cache's valid tokens are known
        kept = 0
        if resume is not None and resume.get("model") is self.model:
            lm, kept = resume["lm"], min(resume["pairs"], resume["valid"], len(prompt) - 1)
            lm.trim(min(lm.length, kept))
        else:
            lm = CachedLM(self.model, drafts=True)
        # known context tokens before the prompt's read, so that a read cut short (Ctrl-C, an error) keeps them
        self.lm, self._valid = lm, min(lm.length, kept)
        if len(prompt) - 1 > kept:
            self.lm.extend(self._visible(prompt[kept:-1]), last_only=True, prompt=True)
        self._valid = len(prompt) - 1  # cached tokens known to be part of the context
        self._proposed_at = len(prompt)
        kernel = native.kernel() if picks(sampling) else None  # a round in one native call
        self.chain = DecoderChain(self.lm, kernel) if kernel is not None and DecoderChain.serves(self.lm) else None

    def keep(self) -> dict | None:
        """The draft's cache and how many of its tokens are the context's, for a conversation's next turn."""
        lm = getattr(self, "lm", None)
        return None if lm is None else {"model": self.model, "lm": lm, "valid": min(self._valid, lm.length)}

    def propose(self, context: list[int], k: int) -> Draft:
        self._proposed_at = len(context)
        if k == 0:
            return Draft.empty(self.device)
        self.lm.trim(min(self.lm.length, self._valid))
        draws = uniforms(self.sampling, k, self.generators.on(self.device))  # a sampled round's k draws
        seen = seen_mask(self.sampling, context, self._ids_size)  # with a repetition penalty: what the round has seen
        if self.chain is not None and torch.is_inference_mode_enabled():  # the round in one native call
            index, probs = self.chain.run(self._visible(context[self.lm.length :]), k, self.stop_below,
                                          self.sampling, draws, seen)
            return self._draft(index if self.token_ids is None else self.token_ids[index], probs)
        # [V] at the last context token; the lm head runs on that position only
        logits = self.lm.extend(self._visible(context[self.lm.length :]), last_only=True)[-1]
        tokens, probs = [], []
        greedy, confident = self.sampling.greedy, Confidence(self.stop_below)
        for i in range(k):
            logits = penalize_seen(logits, self.sampling, seen, self.token_ids)
            if greedy:  # the argmax alone; q (only reported in greedy mode) comes after the loop, all rows at once
                token, q = argmax(logits), logits
            else:
                token, q = choose(logits, self.sampling, None, draws[i])
            if self.token_ids is not None:
                token = self.token_ids[token]
            mark(seen, token)
            tokens.append(token)
            probs.append(q)
            if i + 1 == k or not confident.goes_on(logits):
                break
            logits = self.lm.extend(token.view(1))[-1]  # the last draft token is fed only if the target accepts it
        probs = torch.stack(probs)  # [drafted, draft vocabulary]
        if greedy:
            probs = logits_to_probs(probs, self.sampling)
        return self._draft(torch.stack(tokens), probs)

    def _draft(self, tokens: torch.Tensor, probs: torch.Tensor) -> Draft:
        """The proposal, q scattered onto the full vocabulary where the draft's rows are a reduced one."""
        if self.token_ids is not None:
            probs = probs.new_zeros(len(tokens), self.vocab_size).index_copy_(1, self.token_ids, probs)
        return Draft(tokens, probs)

    def observe(self, num_accepted: int) -> None:
        self._valid = self._proposed_at + num_accepted

    def propose_tree(self, context: list[int], k: int, *, width: int, nodes: int) -> DraftTree:
        """A tree of depth <= k: top-`width` children per expanded node, static or dynamic (nodes >= 1); with a
        repetition penalty each node's children are picked as the target's row there sees: the context and the path."""
        self._proposed_at = len(context)
        self.lm.trim(min(self.lm.length, self._valid))
        root = self.lm.extend(self._visible(context[self.lm.length :]), last_only=True)
        slots: dict[int, int] = {}  # node (grow's numbering) -> its slot among the tree tokens fed
        seen = seen_mask(self.sampling, context, self._ids_size)

        def expand(frontier, tokens, parents):
            if frontier == [-1]:
                return logits_to_probs(penalize_seen(root, self.sampling, seen, self.token_ids), self.sampling)
            feed_parents = [-1 if parents[i] < 0 else slots[parents[i]] for i in frontier]
            for i in frontier:
                slots[i] = len(slots)
            logits = self.lm.extend_tree(self._visible([tokens[i] for i in frontier]), parents=feed_parents)
            paths = frontier_seen(seen, frontier, tokens, parents)
            return logits_to_probs(penalize_seen(logits, self.sampling, paths, self.token_ids), self.sampling)

        tree, kept = grow(expand, depth=k, width=width, nodes=nodes, floor=self.stop_below, token_ids=self.token_ids,
                          vocab_size=self.vocab_size)
        self._slots = [slots.get(old) for old in kept]
        return tree

    def observe_tree(self, path: list[int], **_) -> None:
        """Keep the accepted nodes' keys and values (those it fed, a prefix of the path) after the context."""
        fed = []
        for node in path:
            if self._slots[node] is None:
                break
            fed.append(self._proposed_at + self._slots[node])
        self.lm.keep_path(self._proposed_at, fed)
        self._valid = self._proposed_at + len(fed)
