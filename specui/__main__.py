"""`python -m specui`: speculative decoding in a terminal (specui.terminal)."""

from specui.command_line import run
from specui.terminal import PROG, main

if __name__ == "__main__":
    run(main, PROG)  # a missing model wheel, a bad preset, Ctrl-C: one line, not a traceback
