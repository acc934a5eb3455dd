"""A Chat run reproduced from its download: the served app's sampled run through `gradio_client` (the seed drawn by
-1), its JSON's `command` run as it is written (`python -m specui ...`) gives the very tokens again, a chain in
compare mode and a token tree; a conversation's later message, which no command line decodes, gives them again
from the download's conversation, prompt and settings through the library (docs/showcase.md says both). The
command line's words are the run's settings, read back by `python -m specui`'s own parser."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import fields

import pytest

from specui.settings import DecodeSettings
from specui.ui.request import Settings
from tests.app.test_ui_teach_handoff import chat  # noqa: F401 - the fixture
from tests.helpers import ROOT, served_app, ui_config

PROMPT = "def main(argv):\n    "


def rerun(command: str, tmp_path) -> dict:
    """The download's command run as written (its python this test's), with --json: the record it writes."""
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "specui"], command
    cut = words.index("--")  # the prompt follows it
    out = tmp_path / "again.json"
    done = subprocess.run([sys.executable, *words[1:cut], "--json", str(out), *words[cut:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text(encoding="utf-8"))


def ids(record: dict) -> list[int]:
    return [t["id"] for t in record["tokens"]]


@pytest.mark.slow  # serves the app on the bundled pair, then runs `python -m specui` on it
@pytest.mark.parametrize("settings", [
    {"compare": True},  # the race with plain decoding, after the speculative run, takes the seed too
    {"tree_width": 2, "tree_nodes": 6},  # a dynamic token tree: its children drawn from q, its verification's draws
], ids=["chain-compare", "tree"])
def test_a_sampled_chat_run_decodes_again_to_its_tokens_from_its_downloads_command(settings, tmp_path):
    gradio_client = pytest.importorskip("gradio_client")
    from tests.gradio_calls import chat_call

    with served_app(ui_config()) as url:
        client = gradio_client.Client(url, verbose=False)
        job = chat_call(client, PROMPT, temperature=0.9, seed=-1, num_draft_tokens=3, max_new_tokens=24, **settings)
        last = list(job)[-1]
        # the file's update among the values the client gets (not the event's every output: no state, no button)
        export = next(v["value"] for v in last if isinstance(v, dict) and "specui-run-" in str(v.get("value")))
    with open(export, encoding="utf-8") as f:
        ran = json.load(f)
    assert ran["prompt"] == PROMPT and ran["conversation"] == [] and ran["settings"]["temperature"] == 0.9
    assert set(ran["versions"]) == {"python", "specui", "torch", "transformers"}
    assert f"--seed {ran['seed']}" in ran["command"] and 0 <= ran["seed"] < 10**9  # the seed drawn, in the command
    again = rerun(ran["command"], tmp_path)
    assert ids(again) == ids(ran) and again["text"] == ran["text"] and again["seed"] == ran["seed"]
    if settings.get("compare"):
        assert again["plain_text"] == ran["plain_text"]


def test_the_command_line_reads_back_the_runs_settings_and_prompt_as_they_were():
    from specui.presets import load_config
    from specui.terminal import parse_args, settings_for
    from specui.ui.exports import command_line

    preset = load_config().get("bundled")
    for prompt, changes, chats in [
        ('-- "quoted" \\ $HOME `x`\n  second line ✓', dict(temperature=0.7, top_p=0.9, top_k=40, seed=123456789,
                                                         tree_width=2, tree_nodes=9, repetition_penalty=1.2), False),
        ("-starts with a dash", dict(num_draft_tokens=7, draft_confidence=0.35, adaptive=True, compare=True), False),
        ("chat", dict(system="Answer in French.\nBriefly.", drafter="prompt_lookup", temperature=1e-5, seed=0), True),
        ("a system prompt that starts with a dash", dict(system="--terse"), True),  # one word: no space in it
    ]:
        settings = Settings(preset="bundled", max_new_tokens=40, **{"drafter": "model", **changes})
        words = shlex.split(command_line(preset="bundled", settings=settings, prompt=prompt, chats=chats))
        args = parse_args(words[3:])
        assert args.prompt == prompt and args.preset == "bundled" and args.compare == settings.compare
        assert args.system == (settings.system if chats else "")
        decode = settings_for(args, None, preset)
        for field in fields(DecodeSettings):
            if field.name != "seed" or not settings.greedy:  # a greedy run draws nothing: no seed on its line
                assert getattr(decode, field.name) == getattr(settings, field.name), field.name


@pytest.mark.slow  # decodes a conversation on the bundled pair as a chat preset
def test_a_conversations_later_message_decodes_again_from_its_download_through_the_library(chat):  # noqa: F811
    from specui.prompt_cache import turn_ids
    from specui.ui.chat_handlers import respond
    from tests.app.test_ui_teach_handoff import chat_form

    ui, _, app, _ = chat
    state = {}
    for seed, message in ((11, "def add(a, b):\n    "), (22, "class Stack:\n    ")):
        data = {**chat_form(ui, message, preset="bundled-chat", seed=seed, max_new=16), **state}
        for frame in respond(app, ui, data):
            last = frame
        state = {ui.messages: last[ui.messages], ui.turns: last[ui.turns], ui.exchanges: last[ui.exchanges]}
    with open(last[ui.results.export]["value"], encoding="utf-8") as f:
        ran = json.load(f)
    assert ran["command"] is None  # a command line decodes a message alone
    assert [m["role"] for m in ran["conversation"]] == ["user", "assistant"] and ran["seed"] == 22
    assert ran["conversation"][1]["token_ids"]  # the first answer as the tokens the model wrote
    # docs/showcase.md's lines: the conversation, the message and the settings as the download has them
    pair = app.showcase.cache.get(app.showcase.config.get(ran["preset"]))
    engine, preset = pair.engine(), pair.preset
    prompt_ids = turn_ids(pair.tokenizer, preset, [*ran["conversation"], {"role": "user", "content": ran["prompt"]}],
                          system=ran["settings"]["system"])
    decode = {f.name: ran["settings"][f.name] for f in fields(DecodeSettings)}
    assert list(engine.generate(prompt_ids, DecodeSettings(**decode)).token_ids) == ids(ran)


def test_a_message_or_system_prompt_with_a_nul_character_has_no_command():
    """No command line's argument carries a NUL character (a shell cuts the word there): no command, not a wrong one."""
    from specui.ui.exports import command_line

    settings = Settings(preset="bundled", max_new_tokens=4, system="be\0brief")
    assert command_line(preset="bundled", settings=settings, prompt="a\0b", chats=False) is None
    assert command_line(preset="bundled", settings=settings, prompt="ab", chats=True) is None
    assert command_line(preset="bundled", settings=settings, prompt="ab", chats=False) is not None  # no system read


@pytest.mark.slow  # runs `python -m specui` on the bundled pair
def test_a_message_that_is_a_dash_reaches_the_command_line_as_itself(tmp_path):
    """`python -m specui` reads stdin for a prompt of '-' (a message the Chat tab takes): the command gives it '-'
    there, where it waited on the shell's stdin (a terminal) or refused an empty one."""
    from specui.ui.exports import command_line

    out = tmp_path / "again.json"
    command = command_line(preset="bundled", settings=Settings(preset="bundled", max_new_tokens=4), prompt="-",
                           chats=False)
    command = command.replace("python -m specui", f"{shlex.quote(sys.executable)} -m specui --json {out}", 1)
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["prompt"] == "-"
