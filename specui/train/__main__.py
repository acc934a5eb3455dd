"""`python -m specui.train`: the bundled pair (see specui.train.cli); `python -m specui.train heads ...`:
EAGLE, Medusa and early-exit heads for a preset's target (see specui.train.heads); `python -m specui.train exit ...`:
an early-exit head from the target's greedy answers (see specui.train.exit_head)."""

import sys

from specui.command_line import run

if __name__ == "__main__":
    if sys.argv[1:2] == ["heads"]:
        from specui.train.heads import main as heads_main

        run(heads_main, "python -m specui.train heads", sys.argv[2:])
    elif sys.argv[1:2] == ["exit"]:
        from specui.train.exit_head import main as exit_main

        run(exit_main, "python -m specui.train exit", sys.argv[2:])
    else:
        from specui.train.cli import main

        run(main, "python -m specui.train")
