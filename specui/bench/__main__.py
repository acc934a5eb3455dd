"""`python -m specui.bench`: see specui.bench.cli."""

from specui.bench.cli import main

if __name__ == "__main__":
    main()
