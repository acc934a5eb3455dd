"""specui's Gradio showcase: `python app.py [--preset NAME] [--config models.yaml] [--host H] [--port P] [--share]`,
or `python app.py --target T [--draft D] [--chat]` for a pair not in models.yaml.

Thin on purpose: parse the arguments, read models.yaml, build the Blocks app (specui/ui/blocks.py)
and launch it. A broken config ends the program with one line naming the file and the problem, a starting model
that comes from a PyPI package not installed yet with one line giving the command, and an address it cannot listen
on (a port in use, a host that is not this machine's) with one line naming the option, before any model loads.
"""

from __future__ import annotations

import _thread
import argparse
import errno
import os
import socket
import sys
import threading
from dataclasses import replace


def main(argv: list[str] | None = None) -> int:
    """The app served until Ctrl-C or SIGTERM; the exit status (2: a usage mistake, 130 and 143: the signal's)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before the server ran (the imports, the checks: seconds): one line, as every command
        _say("interrupted")
        return 130


def _say(line: str) -> None:
    """A refusal (`error: ...`) or an interruption in one line on stderr, after the command's name as typed (app.py, or
    specui-app): argparse's form, as its own refusals of a flag and every `python -m specui...` say theirs."""
    print(f"{os.path.basename(sys.argv[0])}: {line}", file=sys.stderr)


def _main(argv: list[str] | None) -> int:
    from specui.command_line import OneLineParser, refuse_empty
    from specui.spaces import preset_from_env

    parser = OneLineParser(description="specui: speculative decoding, visible (a Gradio app)")
    parser.add_argument("--preset", default=None,
                        help="the preset to start with (default: $SPECUI_PRESET, else on a Hugging Face "
                             "Space smollm2-chat-hub, else models.yaml's default)")
    parser.add_argument("--config", help="a models.yaml (default: specui's own, beside this app.py)")
    parser.add_argument("--host", default=None,
                        help="address to listen on (0.0.0.0: every interface; default $GRADIO_SERVER_NAME or "
                             "127.0.0.1)")
    parser.add_argument("--port", type=_port, default=None,
                        help="port to listen on (default $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    pair = parser.add_argument_group("a pair not in models.yaml (the preset 'command-line', first and the default)")
    pair.add_argument("--target", help="the target model: a local folder, a .gguf file or a Hugging Face Hub id")
    pair.add_argument("--draft", help="its draft model (a folder, a .gguf file or a Hub id; without one, prompt "
                                      "lookup drafts)")
    pair.add_argument("--chat", action="store_true",
                      help="wrap prompts in the target's chat template (instruct models)")
    args = parser.parse_args(argv)
    refuse_empty(parser, args, "preset", "config", "target", "draft", "host")
    named = args.preset is not None  # else from the environment, or models.yaml's default
    args.preset = args.preset or preset_from_env()
    if (args.draft or args.chat) and not args.target:
        parser.error("--draft and --chat need --target")
    if args.port is None:
        try:
            args.port = _port(os.environ.get("GRADIO_SERVER_PORT", "7860"))
        except argparse.ArgumentTypeError as e:
            parser.error(f"$GRADIO_SERVER_PORT: {e}")
    host_from = "$GRADIO_SERVER_NAME" if args.host is None and os.environ.get("GRADIO_SERVER_NAME") else "--host"
    args.host = args.host or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"
    if problem := _address_problem(args.host, args.port, host_from=host_from):  # before any model loads
        _say(f"error: {problem}")
        return 2

    from specui.hub import endpoint_problem

    if problem := endpoint_problem():  # huggingface_hub, imported by gradio, would stop with a traceback
        _say(f"error: {problem}")
        return 2

    from specui.loading import LoadError, check_before_loading, conversation_memory
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
        conversation_memory()  # a mistyped SPECUI_CONVERSATION_MEMORY fails every preset's chats: said before serving
        if args.target:
            check_before_loading(start)  # a folder named on the command line that is not there: before any UI
    except (ConfigError, PackagedModelError, LoadError) as e:
        from specui.command_line import refusal_status
        from specui.spaces import on_spaces, wheel_on_space

        _say(f"error: {wheel_on_space(str(e)) if isinstance(e, PackagedModelError) and on_spaces() else e}")
        return refusal_status(e)  # 2, a usage mistake; 1 for a Hub out of reach

    from specui.command_line import stop_signals
    from specui.loading import PairCache
    from specui.spaces import zero_gpu
    from specui.ui.blocks import build, launch
    from specui.ui.session import Showcase

    left = threading.Event()  # stdout's reader left while the preload said its progress
    with stop_signals() as stopped:  # Ctrl-C or SIGTERM: gradio closes the server and returns as if done
        try:
            showcase = Showcase(config, PairCache())  # imports ZeroGPU's `spaces` (where installed) on this thread
            say = _progress(left)
            if zero_gpu():  # the pair loads now, on the thread where `spaces` fakes CUDA, and before the server starts:
                showcase.preload(start, progress=say)  # every GPU call's worker forks with it
            else:  # in the background as the page is built (a page that opens meanwhile asks until it has loaded)
                showcase.preload_soon(start, progress=say)
            demo = build(config, showcase=showcase, preload=False)
            # gradio's one switch for its hint "To create a public link, set `share=True`" (which a local user does
            # not need and a Space never shows) is `quiet`, which drops its "Running on" line too: said here instead.
            # With --share, or GRADIO_SSR_MODE's server-side rendering, gradio says what it does (the public link's
            # terms, a failed Node proxy), not quiet.
            quiet = not args.share and os.environ.get("GRADIO_SSR_MODE", "").lower() != "true"
            launch(demo, server_name=args.host, server_port=args.port, share=args.share, quiet=quiet,
                   prevent_thread_lock=True)
            if quiet:
                print(f"* Running on local URL:  {demo.local_url}", flush=True)
            if not left.is_set():
                demo.block_thread()  # until Ctrl-C or SIGTERM (gradio's own, as launch() would block)
        except KeyboardInterrupt:  # while the page was being built
            pass
        except BrokenPipeError:  # stdout's reader left (`| head`): ended as every command ends it, without a word
            from specui.command_line import READER_LEFT, silence_stdout

            silence_stdout()
            return READER_LEFT
        except OSError as e:  # the port is taken, or the address cannot be bound
            _say(f"error: cannot serve on {args.host}:{args.port} (choose another with --port): {e}")
            return 1
    if left.is_set():
        from specui.command_line import READER_LEFT

        return READER_LEFT
    return 128 + stopped[0] if stopped else 0  # the shell's status for the signal: 130 for Ctrl-C, 143 for SIGTERM


def _progress(left: threading.Event):
    """The preload's progress lines, `specui: ...` on stdout. Its reader gone (`python app.py | head -1` took the URL
    line) ends the app as a failed print of the main thread's own does, with status 141 and without a word: `left`
    set, stdout silenced and the main thread interrupted (gradio closes the server). A failed print in the preload's
    thread had stopped the preload, with a warning on stderr, and the app served on, its model not loaded."""
    def say(line: str) -> None:
        try:
            print(f"specui: {line}", flush=True)
        except BrokenPipeError:
            from specui.command_line import silence_stdout

            silence_stdout()
            if not left.is_set():
                left.set()
                _thread.interrupt_main()  # a Ctrl-C, as the shell's: gradio closes the server, main returns 141

    return say


def _port(text: str) -> int:
    """A TCP port number from the command line or the environment."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {port}")
    return port


def _address_problem(host: str, port: int, *, host_from: str = "--host") -> str | None:
    """Why the app could not listen on host:port, in one line naming the option (None: it can). Gradio's own words
    for every failure, a taken port, a name that resolves nowhere or an address of another machine alike, are
    "Cannot find empty port", after the model has loaded."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1], as a browser writes it
    try:
        family, kind, proto, _, address = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:  # UnicodeError: no host name at all ("a..b")
        why = e.strerror if isinstance(e, socket.gaierror) else "not a host name"
        return (f"{host_from} {host!r} is no address this machine can listen on ({why}): "
                "127.0.0.1 serves this machine alone, 0.0.0.0 every network interface")
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: a port left in TIME_WAIT is free
        try:
            s.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"port {port} is in use on {host} (another program listens there): choose another with --port"
            if e.errno == errno.EADDRNOTAVAIL:
                return (f"{host_from} {host!r} is not an address of this machine: 127.0.0.1 serves this machine "
                        "alone, 0.0.0.0 every network interface")
            if e.errno == errno.EACCES:
                return f"port {port} needs administrator rights (ports below 1024 do): choose another with --port"
            return f"cannot listen on {host}:{port}: {e.strerror or e}"
    return None


if __name__ == "__main__":
    sys.exit(main())
