"""``python -m newt.dropin`` runs a Python program with the drop-in mode on (``newt.dropin.install()``).

    python -m newt.dropin script.py [args...]
    python -m newt.dropin -m module [args...]      # e.g. -m pytest tests/
    python -m newt.dropin -c "code" [args...]
    python -m newt.dropin --capability 9.0 ...     # no GPU: torch.cuda.get_device_capability() says 9.0

``sys.argv`` is what the program would see under ``python`` itself.
"""

from __future__ import annotations

import runpy
import sys

USAGE = ("usage: python -m newt.dropin [--capability X.Y] script.py [args...] | -m module [args...] | "
         "-c code [args...]\n"
         "Runs an unmodified Triton (or Helion) program on newt: 'import triton' comes from newt.")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    capability = None
    if argv[0] == "--capability":
        if len(argv) < 3:
            print(USAGE, file=sys.stderr)
            return 2
        major, _, minor = argv[1].partition(".")
        capability = (int(major), int(minor or 0))
        argv = argv[2:]
    from newt.dropin import install
    install(capability=capability)
    first = argv[0]
    if first == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif first == "-c":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = ["-c"] + argv[2:]
        sys.path.insert(0, "")
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        sys.argv = argv
        import os
        sys.path.insert(0, os.path.dirname(os.path.abspath(first)))
        runpy.run_path(first, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
