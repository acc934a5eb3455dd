"""`python -m specui --chat` in a window resized between turns wraps the next reply at the new width: the width was
read once, at the start, and every reply kept wrapping at it. A real pseudo-terminal, resized as a terminal emulator
resizes it (TIOCSWINSZ)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

from tests.helpers import BUNDLED_TARGET, ROOT, read_until_closed


def _resize(fd: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))


def _lines(raw: bytes) -> list[str]:
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw.decode().replace("\r\n", "\n"))
    return [line for line in text.split("\n") if line]


@pytest.mark.slow
def test_a_window_resized_between_turns_wraps_the_next_reply_at_its_new_width():
    if not BUNDLED_TARGET.exists():
        pytest.skip("the bundled pair is not in assets/")
    main, child = pty.openpty()
    _resize(child, 80)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the terminal's own size
    proc = subprocess.Popen([sys.executable, "-m", "specui", "--preset", "bundled", "--chat", "--max-new-tokens", "48",
                             "--color", "never"], cwd=ROOT, stdin=subprocess.PIPE, stdout=child,
                            stderr=subprocess.PIPE, env=env, text=True)
    os.close(child)
    try:
        proc.stdin.write("The history of the world\n")
        proc.stdin.flush()
        for line in proc.stderr:  # the first reply's stats line: the reply is written
            if " tokens · " in line:
                break
        first = b""
        while select.select([main], [], [], 1)[0]:
            first += os.read(main, 65536)
        _resize(main, 20)  # the user narrows the window
        proc.stdin.write("The history of the world\n")
        proc.stdin.close()  # then the end of input ends the chat
        second = read_until_closed(main)
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    finally:
        proc.kill()
        os.close(main)
    assert max(map(len, _lines(first))) > 20, _lines(first)  # wrapped at 80
    assert _lines(second) and max(map(len, _lines(second))) <= 20, _lines(second)  # at 20: the width read again
