"""``python -m newt check PATH...``: check kernels from the command line.

Prints ``path:line:col: error[CODE] message`` like ruff or mypy (``--format
json`` for a JSON list) and exits 1 when there are errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _iter_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__"))
                for f in sorted(files):
                    if f.endswith(".py"):
                        yield os.path.join(root, f)
        else:
            yield p


def _check(args) -> int:
    from newt.frontend import analyze_source, load_installed_kinds
    from newt.frontend.diagnostics import Severity, render

    for failure in load_installed_kinds():  # other kernel kinds (entry points newt.kernel_kinds)
        print(f"newt: a kernel-kind plugin failed to load: {failure}", file=sys.stderr)

    severities = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}
    min_sev = severities[args.min_severity]
    n_err = 0
    out_json = []
    for path in _iter_files(args.paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"{path}: cannot read: {e.strerror}", file=sys.stderr)
            n_err += 1
            continue
        fa = analyze_source(text, path, record_notes=False)
        for d in fa.diagnostics:
            if d.severity > min_sev:
                continue
            if d.severity == Severity.ERROR:
                n_err += 1
            if args.format == "json":
                out_json.append(d.to_json(path))
            elif args.format == "full":
                print(render(d, text))
            else:
                line = d.format(path=path)
                print(line)
    if args.format == "json":
        json.dump(out_json, sys.stdout, indent=1)
        print()
    elif args.format != "json" and n_err:
        print(f"Found {n_err} error{'s' if n_err != 1 else ''}.", file=sys.stderr)
    return 1 if n_err else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="newt", description="newt kernel tools")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check the @newt.jit kernels of Python files without running them")
    c.add_argument("paths", nargs="+", help="files or directories")
    c.add_argument("--format", choices=("text", "full", "json"), default="text",
                   help="text: one line per diagnostic; full: with the source line and a caret; json: a JSON list")
    c.add_argument("--min-severity", choices=("error", "warning", "info"), default="warning",
                   help="lowest severity to report (default: warning)")
    args = parser.parse_args(argv)
    if args.cmd == "check":
        return _check(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
