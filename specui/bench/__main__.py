"""`python -m specui.bench`: see specui.bench.cli."""

from specui.bench.cli import main
from specui.command_line import run

if __name__ == "__main__":
    run(main, "python -m specui.bench")  # a bad preset, folder or prompt length: one line, not a traceback
