"""`python -m specui.train`: the bundled pair (see specui.train.cli); `python -m specui.train heads ...`:
EAGLE, Medusa and early-exit heads for a preset's target (see specui.train.heads)."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["heads"]:
        from specui.train.heads import main as heads_main

        heads_main(sys.argv[2:])
    else:
        from specui.train.cli import main

        main()
