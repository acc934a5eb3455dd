"""`python -m specui.bench`: see specui.bench.cli. Its flags are read first, without torch (specui.bench.flags):
--help and a flag's mistake answer at once."""

from specui.command_line import run


def main(argv=None) -> dict:
    from specui.bench.flags import parse_args

    args = parse_args(argv)
    from specui.bench.cli import main as bench  # torch and the models: once the flags are sound

    return bench(argv, args=args)


if __name__ == "__main__":
    run(main, "python -m specui.bench")  # a bad preset, folder or prompt length: one line, not a traceback
