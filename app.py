"""specui's Gradio showcase: `python app.py [--preset NAME] [--config models.yaml] [--host H] [--port P] [--share]`,
or `python app.py --target T [--draft D] [--chat]` for a pair not in models.yaml.

Thin on purpose: parse the arguments, read models.yaml, build the Blocks app (specui/ui/blocks.py)
and launch it. A broken config ends the program with one line naming the file and the problem, and a
starting model that comes from a PyPI package not installed yet, with one line giving the command.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace


def main(argv: list[str] | None = None) -> int:
    from specui.spaces import preset_from_env

    parser = argparse.ArgumentParser(description="specui: speculative decoding, visible (a Gradio app)")
    parser.add_argument("--preset", default=None,
                        help="the preset to start with (default: $SPECUI_PRESET, else on a Hugging Face "
                             "Space smollm2-chat-hub, else models.yaml's default)")
    parser.add_argument("--config", help="a models.yaml (default: the one beside specui/)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to listen on (0.0.0.0: every interface; default $GRADIO_SERVER_NAME or "
                             "127.0.0.1)")
    parser.add_argument("--port", type=_port, default=None,
                        help="port to listen on (default $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    pair = parser.add_argument_group("a pair not in models.yaml (the preset 'command-line', first and the default)")
    pair.add_argument("--target", help="the target model: a local folder or a Hugging Face Hub id")
    pair.add_argument("--draft", help="its draft model (a folder or a Hub id; without one, prompt lookup drafts)")
    pair.add_argument("--chat", action="store_true",
                      help="wrap prompts in the target's chat template (instruct models)")
    args = parser.parse_args(argv)
    named = args.preset is not None  # else from the environment, or models.yaml's default
    args.preset = args.preset or preset_from_env()
    if (args.draft or args.chat) and not args.target:
        parser.error("--draft and --chat need --target")
    if args.port is None:
        try:
            args.port = _port(os.environ.get("GRADIO_SERVER_PORT", "7860"))
        except argparse.ArgumentTypeError as e:
            parser.error(f"$GRADIO_SERVER_PORT: {e}")

    from specui.hub import endpoint_problem

    if problem := endpoint_problem():  # huggingface_hub, imported by gradio, would stop with a traceback
        print(f"error: {problem}", file=sys.stderr)
        return 2

    from specui.loading import LoadError, check_before_loading
    from specui.packaged import PackagedModelError, ensure_available, is_packaged
    from specui.presets import ConfigError, load_config, with_pair

    try:
        config = load_config(args.config)
        if args.target:
            config = with_pair(config, args.target, args.draft, chat=args.chat)
        elif args.preset:
            try:
                config.get(args.preset)  # fails with the known names
            except ConfigError as e:
                source = "$SPECUI_PRESET" if os.environ.get("SPECUI_PRESET") else "a Hugging Face Space's default"
                raise ConfigError(str(e) if named else f"{e} (the preset came from {source})") from None
            config = replace(config, default=args.preset)
        start = config.get(None)
        if is_packaged(start.target):
            ensure_available(start.target)  # a missing wheel: one line with the command, before any UI
        if args.target:
            check_before_loading(start)  # a folder named on the command line that is not there: before any UI
    except (ConfigError, PackagedModelError, LoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from specui.ui.blocks import build, launch

    demo = build(config)
    try:
        launch(demo, server_name=args.host, server_port=args.port, share=args.share)
    except OSError as e:  # the port is taken, or the address cannot be bound
        print(f"error: cannot serve on {args.host}:{args.port} (choose another with --port): {e}", file=sys.stderr)
        return 1
    return 0


def _port(text: str) -> int:
    """A TCP port number from the command line or the environment."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {port}")
    return port


if __name__ == "__main__":
    sys.exit(main())
