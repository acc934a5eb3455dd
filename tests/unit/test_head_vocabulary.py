"""The chat heads' draft vocabulary: the ids the target writes most, so that few of its tokens are out of reach.

A head proposes only its `output.token_ids` (q = 0 elsewhere); a target token outside them is never drafted. Until
2026-11-28 the chat heads kept a list picked from early, narrower data (a warm start keeps the saved ids): it held
0.867 of the GPU rounds' answer tokens and 0.853 of the target's greedy tokens on the held-out prompts. The Medusa
and early-exit heads were retrained on the answers' 8,192 most frequent ids (0.984 and 0.955). The EAGLE head keeps
its list: on the new one its step-1 agreement rose (0.649 -> 0.659) but its tokens per target forward did not
(2.20 -> 2.19 on the 16 held-out prompts, docs/performance.md). Since 2026-12-02 (stop 63) the Medusa and
early-exit heads keep the 2,048 most frequent of their 8,192 (`python -m tools.head_vocabulary`; 0.893 of the answer
tokens): their acceptance did not move, their draft steps got cheaper (docs/performance.md, stop 63). The GPU round
of 2026-12-04 added 4.4M answer tokens (0.889 of all 5.8M in their 2,048) and an EAGLE head trained on all of them
with a fresh pick of 8,192 ids (0.980).
"""

import tarfile

import torch

from specui.heads.common import load_state

ANSWERS = "tools/gpu_answers.tar.xz"  # the GPU rounds' answers (token ids), as tools.gpu_carry carries them


def answer_tokens(tmp_path) -> torch.Tensor:
    with tarfile.open(ANSWERS) as tar:
        members = [m for m in tar.getmembers()  # answers, not their greedy labels (argmax-sampled-*.pt)
                   if m.name.endswith(".pt") and m.name.rsplit("/", 1)[1].startswith(("answers-", "sampled-"))]
        tar.extractall(tmp_path, members=members, filter="data")
    records = [r for m in members for r in torch.load(tmp_path / m.name)]
    return torch.cat([r["ids"][int(r["prompt_len"]):].long() for r in records])


def coverage(tokens: torch.Tensor, head: str, size: int) -> float:
    ids = load_state(f"assets/smollm2-heads/{head}")["output.token_ids"].long()
    assert len(ids) == size and len(ids.unique()) == size
    return float(torch.isin(tokens, ids).float().mean())


def test_the_medusa_and_early_exit_heads_draft_from_the_ids_the_target_writes_most(tmp_path):
    tokens = answer_tokens(tmp_path)
    assert 0.885 < coverage(tokens, "medusa", 2048) < 0.895 and 0.885 < coverage(tokens, "early_exit", 2048) < 0.895
    assert 0.975 < coverage(tokens, "eagle", 8192) < 0.985  # picked afresh from every round's answers
