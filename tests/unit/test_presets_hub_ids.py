"""Reading models.yaml imports no huggingface_hub (slow to import, and needless for the offline presets): a Hub id is
checked by specui.presets' own copy of huggingface_hub's `validate_repo_id` rules, held here to the same answers, and
huggingface_hub loads only where a Hub preset loads (specui.hub)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specui.presets import ConfigError, parse_config
from tests.helpers import ROOT

IDS = ["gpt2", "Qwen/Qwen2.5-7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "a/b", "123", "Foo-BAR_foo.bar123",
       "org/" + "x" * 96, "org/" + "x" * 97, "x" * 96, "datasets/foo/bar", ".repo", "repo.", "-repo", "repo-",
       "org/.repo", "org/repo-", "foo--bar", "foo..bar", "foo.git", "org/foo.git", "org/foo.gitx", "foo bar", "",
       "/", "org/", "/name", "org//name", "ä/ünï", "名前/モデル", "org/na_me", "_org/name", "org/name_", "o:rg/name",
       "org/name?", "a.b/c.d", "a-b/c-d", "a_b/c_d", "a-.b", "a.-b", "a._b"]


@pytest.mark.parametrize("ref", IDS)
def test_a_hub_id_is_checked_as_huggingface_hub_checks_it(ref):
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    from specui.presets import is_hub_id

    try:
        validate_repo_id(ref)
        valid = True
    except HFValidationError:
        valid = False
    assert is_hub_id(ref) == valid


def test_a_malformed_hub_id_is_still_refused_naming_the_file_and_the_key(tmp_path):
    raw = {"presets": {"p": {"target": "org/na..me"}}}
    with pytest.raises(ConfigError, match=r"^models\.yaml: presets\.p\.target: 'org/na\.\.me' is neither a folder "
                                          r"\(local paths are relative to models\.yaml; none is there\) nor a Hugging "
                                          r"Face Hub id \(org/name\)$"):
        parse_config(raw, path=tmp_path / "models.yaml")
    assert parse_config({"presets": {"p": {"target": "org/name"}}}, path=tmp_path / "models.yaml").get("p").target \
        == "org/name"


def test_reading_models_yaml_imports_no_huggingface_hub():
    """The default models.yaml, whose Hub presets (Qwen, smollm2-chat-hub) are read too, in a fresh interpreter."""
    code = ("import sys, specui.presets as p; c = p.load_config(); "
            "print(__import__('json').dumps([len(c.names), [m for m in ('huggingface_hub', 'torch', 'transformers') "
            "if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    count, heavy = json.loads(out.stdout)
    assert count > 1 and heavy == []
