"""Fixtures and the test session's settings; the helpers live in tests/helpers.py (imported explicitly)."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from tests.helpers import make_model, noisy_copy

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# huggingface_hub reads HF_HUB_OFFLINE and HF_ENDPOINT once, as it is imported: imported first by a test that set them
# for a while (tests/unit/test_hub_outage.py: online, a local Hub since closed), it kept them, and a later test that
# set HF_HUB_OFFLINE=1 had transformers retry the closed Hub for 46 s. Imported here, it reads the suite's.
import huggingface_hub.constants  # noqa: E402,F401 (the package imports its submodules as they are used)
torch.set_num_threads(1)  # tiny models: one thread is several times faster than two on a busy 2-core machine


@pytest.fixture(scope="session")
def llama_pair():
    target = make_model("llama", layers=3, seed=0)
    return target, noisy_copy(target, noise=0.35, seed=1)


@pytest.fixture
def kernel():
    """specui's native build for this CPU (skips without a C compiler, where the lean forward takes MKL's products
    and torch's ops instead)."""
    from specui import native

    if shutil.which(os.environ.get("CC") or "cc") is None:
        pytest.skip("no C compiler on PATH (the lean forward then takes MKL's products)")
    found = native.kernel()
    assert found is not None, "a C compiler is on PATH, so the native build must load"
    return found
