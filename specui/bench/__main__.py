"""`python -m specui.bench`: see specui.bench.cli."""

from specui.bench.cli import main
from specui.engine import ContextLengthError

if __name__ == "__main__":
    try:
        main()
    except ContextLengthError as e:  # the prompts plus --max-new-tokens outgrow the model: one line, not a traceback
        raise SystemExit(f"python -m specui.bench: error: {e}") from None
