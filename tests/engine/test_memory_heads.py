"""Memory the trained heads hold (the memory audit): bytes counted as distinct tensor storages, never RSS.

Heads of one target that read the same ids share one copy of the target's output rows at those ids (the chat
preset's Medusa and early-exit heads both read 2,048 ids: 4.5 MB of float32 rows and 2.25 MB of float16 panels
were held twice), and nothing a head loads keeps its file mapped."""

import gc

import pytest
import torch

import specui.heads
from specui import native, products
from specui.heads import common, early_exit, medusa
from tests.helpers import make_model

IDS = torch.tensor([0, 2, 3, 5, 7, 11, 13, 17, 19, 23])


def _distinct_bytes(*tensors: torch.Tensor) -> int:
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def _expected_rows(target, ids: torch.Tensor) -> torch.Tensor:
    """What a head's output rows were before they were shared: the target's rows at the ids, at float16's values."""
    return target.lm_head.weight.detach()[ids].half().float()


@pytest.fixture(scope="module")
def target():
    return make_model("llama", vocab_size=96, layers=2, hidden=64, seed=3)


def test_saved_heads_of_one_target_and_ids_share_their_output_rows(target, tmp_path):
    common.save(medusa.build(target, token_ids=IDS, num_heads=2), tmp_path / "medusa")
    common.save(early_exit.build(target, token_ids=IDS, exit_layer=1), tmp_path / "early_exit")
    heads = [specui.heads.load(tmp_path / name, target) for name in ("medusa", "early_exit")]
    rows = [head.output._rows for head in heads]
    assert rows[0] is rows[1]
    assert _distinct_bytes(*rows) == rows[0].nbytes == len(IDS) * 64 * 4
    for head in heads:  # the values every head had before
        assert torch.equal(head.output._rows, _expected_rows(target, IDS))


def test_shared_rows_give_one_prepared_product():
    """A head's product is prepared per weight (`specui.products.linear`): shared rows, one set of panels."""
    big = make_model("llama", vocab_size=640, layers=2, hidden=256, seed=4)  # rows of 640 x 256: above SMALL_WEIGHT
    ids = torch.arange(0, 640, 1)
    a, b = (medusa.build(big, token_ids=ids, num_heads=1), early_exit.build(big, token_ids=ids, exit_layer=1))
    x = torch.randn(1, 256)
    with torch.inference_mode():
        out = [head.output(x, normed=True) for head in (a, b)]
    assert torch.equal(out[0], out[1])
    prepared = {key for key in products._prepared_cache if key[1] in (id(a.output._rows), id(b.output._rows))}
    assert len(prepared) == (1 if native.kernel() is not None else 0)


def test_rows_are_not_shared_across_ids_targets_or_edits(target):
    a = medusa.build(target, token_ids=IDS, num_heads=1)
    other_ids = medusa.build(target, token_ids=IDS[:-1], num_heads=1)
    assert other_ids.output._rows is not a.output._rows
    assert torch.equal(other_ids.output._rows, _expected_rows(target, IDS[:-1]))
    twin = make_model("llama", vocab_size=96, layers=2, hidden=64, seed=5)
    assert medusa.build(twin, token_ids=IDS, num_heads=1).output._rows is not a.output._rows
    before = a.output._rows.clone()
    with torch.no_grad():
        target.lm_head.weight.mul_(2)  # edited in place: a head bound now reads the new rows, the old keeps its own
    try:
        fresh = early_exit.build(target, token_ids=IDS, exit_layer=1)
        assert fresh.output._rows is not a.output._rows
        assert torch.equal(fresh.output._rows, _expected_rows(target, IDS))
        assert torch.equal(a.output._rows, before)
    finally:
        with torch.no_grad():
            target.lm_head.weight.div_(2)


def test_rounding_one_heads_rows_leaves_a_sharing_heads_rows(target):
    a, b = (medusa.build(target, token_ids=IDS, num_heads=1), early_exit.build(target, token_ids=IDS, exit_layer=1))
    assert a.output._rows is b.output._rows
    a.output.round_rows()
    assert a.output._rows is not b.output._rows
    assert torch.equal(b.output._rows, _expected_rows(target, IDS))


def test_dropped_heads_leave_no_rows_behind(target):
    heads = [medusa.build(target, token_ids=IDS, num_heads=1) for _ in range(3)]
    del heads
    gc.collect()
    fresh = medusa.build(target, token_ids=IDS, num_heads=1)
    assert torch.equal(fresh.output._rows, _expected_rows(target, IDS))
    assert all(w() is not None and r() is not None for w, r in common._ROWS.values())


def _mapped(folder) -> list[str]:
    with open("/proc/self/maps") as maps:
        return [line.split()[-1] for line in maps if str(folder) in line]


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")
def test_a_loaded_head_keeps_no_file_mapped(target, tmp_path):
    """safetensors maps a file to read it; a tensor left as it read it (the ids, int64) kept the whole file mapped
    and its pages resident: the chat preset's heads held 9 MB of their files for 80 KB of ids."""
    common.save(medusa.build(target, token_ids=IDS, num_heads=2), tmp_path / "medusa")
    head = specui.heads.load(tmp_path / "medusa", target)
    gc.collect()
    assert _mapped(tmp_path) == []
    assert torch.equal(head.output.token_ids, IDS)


def test_rows_follow_weights_edited_in_place_without_a_version(target):
    """`param.data.copy_(...)` (how many scripts put a fine-tune's or a merge's weights in place) and edits of an
    inference tensor leave the weight's id, address and version as they were: a head bound afterwards must still read
    the rows the target has now, not those an earlier head holds."""
    a = medusa.build(target, token_ids=IDS, num_heads=1)
    before = a.output._rows.clone()
    original = target.lm_head.weight.detach().clone()
    target.lm_head.weight.data.mul_(2)  # no version counted
    try:
        fresh = early_exit.build(target, token_ids=IDS, exit_layer=1)
        assert torch.equal(fresh.output._rows, _expected_rows(target, IDS))
        assert torch.equal(a.output._rows, before)  # the earlier head keeps its own
    finally:
        target.lm_head.weight.data.copy_(original)


def test_rows_of_an_offloaded_output_layer_load_unshared():
    """An output layer on 'meta' (offloaded by accelerate) has no values to compare: its head's rows load as before
    sharing came (a review: `torch.equal` raised at load, and the preset with it)."""
    from specui.heads.common import _shared_rows

    weight = torch.empty(50, 8, device="meta")
    ids = torch.tensor([1, 4, 9])
    first, second = _shared_rows(weight, ids, False), _shared_rows(weight, ids, False)
    assert first.is_meta and first.shape == (3, 8) and second is not first
