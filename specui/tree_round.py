"""One tree round of the engine: draft a token tree, verify it in one target forward, keep the path.

    1. the drafter proposes a `DraftTree` (N nodes, each with its parent) to depth <= K;
    2. the target scores [cur, node_0..node_{N-1}] in one forward (`CachedLM.extend_tree`): node i at
       position len(context) + depth(i), attending to the prefix, cur and its ancestors: N+1 rows of p;
    3. `verify_tree` walks the tree and emits the accepted path's tokens plus one target token;
    4. the target's cache keeps cur and the accepted nodes (`keep_path`), the drafter learns the path
       (`observe_tree`, with the target's states of cur and the path when it reads them).
The engine calls `tree_round` instead of its chain round when tree_width > 1.
"""

from __future__ import annotations

import time

import torch

from specui.drafters.base import features_of
from specui.events import Kind, Round, TreeNode
from specui.kv import CachedLM
from specui.sampling import Generators, Rows, Sampling, argmax, penalize


def tree_round(engine, *, target: CachedLM, drafter, context: list[int], k: int, width: int, nodes: int,
               sampling: Sampling, generators: Generators) -> Round:
    """One round (see the module docstring); `engine` gives the rule (`verify_tree`), devices and timing."""
    t0 = time.perf_counter()
    tree = drafter.propose_tree(context, k, width=width, nodes=nodes)
    tokens, parents = _check(tree, engine, drafter)
    draft_s = engine._sync_time(t0)
    t1 = time.perf_counter()

    features = features_of(drafter)
    root = len(context) - 1  # cur's slot: the cache holds everything before it
    ids = torch.cat([torch.tensor(context[-1:], device=engine.device), tokens])
    logits = target.extend_tree(ids, parents=[-1] + [p + 1 for p in parents], features=features)
    forward_s = engine._sync_time(t1)
    if features:
        logits, states = logits
    token_list = tokens.tolist()
    logits = penalize(logits, sampling, context, token_list, parents)  # a row has seen its node's ancestors
    device = logits.device
    draft_probs = None if tree.probs is None else _pad(tree.probs.to(device), engine.vocab_size)
    target_probs = Rows(logits, sampling)  # [N+1, V]; sampled, a row is transformed when the walk reads it
    verdict = engine.verify_tree(target_probs=target_probs, draft_tokens=tokens.to(device), parents=parents,
                                 draft_probs=None if sampling.greedy else draft_probs, sampled=tree.sampled,
                                 generator=generators.for_tensor(target_probs),
                                 target_argmax=argmax(logits) if sampling.greedy else None)
    path = verdict.path
    target.keep_path(root + 1, [root + 1 + i for i in path])
    if features:
        drafter.observe_tree(path, features=states[[0] + [i + 1 for i in path]])
    else:
        drafter.observe_tree(path)

    n = len(path)
    rows = [0] + [p + 1 for p in parents]  # the row whose p judged node i: its parent's
    # p(x) of every node at its parent (sampled: None where the walk never read the parent's row)
    p_nodes = target_probs.probs(rows[1:], token_list, needed=-1)
    q_nodes = ([1.0] * len(parents) if draft_probs is None
               else draft_probs[torch.arange(len(parents), device=device), tokens.to(device)].tolist())
    nodes_out = tuple(TreeNode(index=i, token_id=token_list[i], parent=parents[i], target_prob=p_nodes[i],
                               draft_prob=q_nodes[i], accept_prob=verdict.accept_probs[i], uniform=verdict.uniforms[i],
                               verdict=verdict.verdicts[i]) for i in range(len(parents)))
    stop_row = 0 if not path else path[-1] + 1
    p_next = float(target_probs[stop_row, verdict.next_token])
    spine = list(path)  # the walked path: the accepted nodes, then the first rejected child where it stopped
    rejected = [i for i in range(len(parents)) if verdict.verdicts[i] == "rejected" and parents[i] == stop_row - 1]
    spine += rejected[:1]
    residual_top = []
    if verdict.residual is not None:
        top = torch.topk(verdict.residual, min(10, verdict.residual.shape[0]))
        residual_top = [(int(i), float(v)) for i, v in zip(top.indices.tolist(), top.values.tolist()) if v > 0]
    verify_s = engine._sync_time(t1)
    return Round(index=0, token_ids=[token_list[i] for i in path] + [verdict.next_token],
                 kinds=[Kind.ACCEPTED] * n + [verdict.next_kind], drafted=[token_list[i] for i in spine],
                 num_accepted=n, target_probs=[p_nodes[i] for i in spine], draft_probs=[q_nodes[i] for i in spine],
                 accept_probs=[verdict.accept_probs[i] for i in spine],
                 uniforms=[verdict.uniforms[i] for i in spine] if not sampling.greedy else [],
                 token_target_probs=[p_nodes[i] for i in path] + [p_next],
                 token_draft_probs=[q_nodes[i] if draft_probs is not None else None for i in path] + [None],
                 residual_top=residual_top, num_draft_tokens=k, draft_s=draft_s, verify_s=verify_s, elapsed_s=0.0,
                 tree=nodes_out, tree_path=tuple(path), tree_sampled=bool(tree.sampled), forward_s=forward_s)


def _check(tree, engine, drafter) -> tuple[torch.Tensor, list[int]]:
    """The tree's tokens on the target's device and its parents, checked (ids, shapes, parents first)."""
    name = getattr(drafter, "name", type(drafter).__name__)
    tokens = torch.as_tensor(tree.tokens).to(device=engine.device, dtype=torch.long).reshape(-1)
    parents = [int(p) for p in tree.parents]
    if len(parents) != tokens.shape[0] or any(not -1 <= p < i for i, p in enumerate(parents)):
        raise ValueError(f"drafter {name!r} gave a tree of {tokens.shape[0]} tokens with parents {parents}; each "
                         "parent must be -1 (the root) or an earlier node")
    if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < engine.vocab_size):
        raise ValueError(f"drafter {name!r} proposed token ids outside the target's vocabulary [0, {engine.vocab_size})")
    if tree.probs is not None and (tree.probs.dim() != 2 or tree.probs.shape[0] != len(parents)
                                   or tree.probs.shape[1] > engine.vocab_size):
        raise ValueError(f"drafter {name!r} gave q of shape {tuple(tree.probs.shape)} for {len(parents)} nodes")
    if tree.sampled and tree.probs is None:
        raise ValueError(f"drafter {name!r} sampled its tree's children but gave no q to verify them with")
    return tokens, parents


def _pad(probs: torch.Tensor, vocab_size: int) -> torch.Tensor:
    missing = vocab_size - probs.shape[-1]
    return torch.nn.functional.pad(probs, (0, missing)) if missing > 0 else probs

