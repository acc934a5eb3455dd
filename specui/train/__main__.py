"""`python -m specui.train`: see specui.train.cli."""

from specui.train.cli import main

if __name__ == "__main__":
    main()
