"""The Chat download's `command` (docs/showcase.md, "Reproducing a run"): a line a user prints and pastes into a
terminal. A message holding `$(...)`, a backtick or quotes is one quoted word of it, read back as written; a message
or system prompt holding a control character a terminal obeys (Ctrl-C, DEL, ESC, a carriage return, a tab) has no
command, since pasted, a Ctrl-C dropped the line so far and the message's next line ran as a command of its own."""

from __future__ import annotations

import shlex

import pytest

from specui.ui.exports import command_line
from specui.ui.request import Settings

OBEYED = {"Ctrl-C": "\x03", "Ctrl-U": "\x15", "DEL": "\x7f", "ESC": "\x1b", "a carriage return": "\r",
          "an 8-bit CSI": "\x9b", "the end of a bracketed paste": "\x1b[201~", "a tab": "\t"}


@pytest.mark.parametrize("name", OBEYED)
def test_a_message_or_system_prompt_a_terminal_would_obey_has_no_command(name):
    """Each control character in the message, or in a chat preset's system prompt, leaves the download no command,
    where it made one whose paste into bash ran `touch /tmp/pwned` (shown in a pty by the review of session 103)."""
    hostile = f"hi{OBEYED[name]}\ntouch /tmp/pwned\n"
    assert command_line(preset="bundled", settings=Settings(preset="bundled"), prompt=hostile, chats=False) is None
    system = Settings(preset="bundled", system=hostile)
    assert command_line(preset="bundled", settings=system, prompt="hi", chats=True) is None
    assert command_line(preset="bundled", settings=system, prompt="hi", chats=False) is not None  # no system read


def test_a_tab_that_completes_a_file_name_has_no_command():
    """A tab, pasted into a shell that reads a paste as typed (bash before 5.1, or bracketed paste off), completed the
    quoted word; `'/etc/os-relea<tab>` names one file, so bash closed its quote and ran the rest: shown in a pty by the
    review of helper D's work (touch ran, and the line break after it ran it without Enter)."""
    hostile = "/etc/os-relea\t; touch /tmp/pwned; : \n"
    assert command_line(preset="bundled", settings=Settings(preset="bundled"), prompt=hostile, chats=False) is None


def test_shell_syntax_in_a_message_is_one_quoted_word_read_back_as_written():
    """`$(...)`, backticks, quotes, a semicolon and line breaks stay a command, its message one word."""
    prompt = "$(touch /tmp/pwned) `touch /tmp/pwned`; ' \" \\ \n    indented ✓ \u202eabc"
    line = command_line(preset="bundled", settings=Settings(preset="bundled"), prompt=prompt, chats=False)
    words = shlex.split(line)
    assert words[-2:] == ["--", prompt] and words[:3] == ["python", "-m", "specui"]
