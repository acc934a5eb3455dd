"""`python -m specui.bench`: see specui.bench.cli. Its flags are read first, without torch (specui.bench.flags):
--help, a flag's mistake and what the preset makes of the flags answer at once."""

from specui.command_line import run


def main(argv=None) -> dict:
    from specui.bench.flags import parse_args
    from specui.bench.preflight import checked_preset

    args = parse_args(argv)
    checked_preset(args)  # what the preset makes of them, still without torch
    from specui.bench.cli import main as bench  # torch and the models: once the flags are sound

    return bench(argv, args=args)


if __name__ == "__main__":
    run(main, "python -m specui.bench")  # a bad preset, folder or prompt length: one line, not a traceback
