"""``python -m lsp_server`` / ``newt-lsp``: run the newt language server.

The guard that drops the working directory from ``sys.path`` runs first, before any import that could be
shadowed: Python puts the working directory (the workspace, when an editor starts the server there) first on
``sys.path`` for ``-m``, and a workspace ``argparse.py``, ``logging.py`` or ``threading.py`` would otherwise run
inside the server.  Only ``os`` and ``sys`` are used before it (both loaded by the interpreter at start-up)."""

import os
import sys


def _drop_working_directory_from_path():
    """Python puts the working directory first on ``sys.path`` for ``-m`` (unless ``-P``/``PYTHONSAFEPATH``);
    an editor that starts the server in the workspace would make every later import (``argparse``, ``newt``,
    ``json`` inside a library...) prefer the workspace's files. Drop it, unless it is where this package lives
    (a checkout run as ``python -m lsp_server``), and keep it off for the workers (``PYTHONSAFEPATH``)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = os.getcwd()
    if sys.path and sys.path[0] in ("", cwd) and os.path.abspath(sys.path[0] or cwd) != here:
        del sys.path[0]
    os.environ["PYTHONSAFEPATH"] = "1"


_drop_working_directory_from_path()

import argparse  # noqa: E402 - after the guard above, on purpose
import logging  # noqa: E402

from . import __version__  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="newt-lsp", description="The newt kernel language server (LSP over stdio).")
    p.add_argument("--stdio", action="store_true", help="speak LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", metavar="HOST:PORT", nargs="?", const="127.0.0.1:2087",
                   help="listen on a TCP port instead (default 127.0.0.1:2087)")
    p.add_argument("--log-file", metavar="PATH", help="also write the server's log to this file")
    p.add_argument("--log-level", default="info", choices=["error", "warning", "info", "debug"])
    p.add_argument("--version", action="version", version=f"newt-lsp {__version__}")
    args = p.parse_args(argv)

    level = getattr(logging, args.log_level.upper())
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file, encoding="utf-8"))
    logging.basicConfig(level=level, handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("newt-lsp").setLevel(level)
    logging.getLogger("pygls").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)

    if os.environ.get("NEWT_LSP_FAULTHANDLER") == "1":  # `kill -USR1 <pid>` prints every thread's stack
        import faulthandler
        import signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    from .server import create_server
    server = create_server()
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        try:
            port_n = int(port)
        except ValueError:
            p.error(f"--tcp expects HOST:PORT, got {args.tcp!r}")
        return server.start_tcp(host or "127.0.0.1", port_n)
    # 0 after shutdown and exit (or at the end of the input), 1 for an exit without shutdown
    return server.start_io()


if __name__ == "__main__":
    sys.exit(main())
