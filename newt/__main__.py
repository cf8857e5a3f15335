"""``python -m newt check PATH...``: check kernels from the command line.

Prints ``path:line:col: error[CODE] message`` like ruff or mypy, each diagnostic's ``hint:`` under it, and a
one-line summary (``checked 5 files, 3 kernels: 0 errors, 1 warning``); ``--format json`` for a JSON list.
Exits 1 when there are errors.  The analysis is the editor's (``newt.frontend.Analyzer``), launches' pointer
dtypes included, so the two always report the same diagnostics.
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _check(args) -> int:
    from newt.diagnostics import Severity, render
    from newt.frontend import analyze_source, load_installed_kinds

    for failure in load_installed_kinds():  # other kernel kinds (entry points newt.kernel_kinds)
        print(f"newt: a kernel-kind plugin failed to load: {failure}", file=sys.stderr)

    severities = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}
    min_sev = severities[args.min_severity]
    counts = {Severity.ERROR: 0, Severity.WARNING: 0, Severity.INFO: 0}
    n_files = n_kernels = unreadable = 0
    out_json = []
    for path in _iter_files(args.paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"{path}: cannot read: {e.strerror}", file=sys.stderr)
            unreadable += 1
            continue
        n_files += 1
        # the same analysis as the editor's (newt.frontend.Analyzer): the launches' pointer dtypes included
        fa = analyze_source(text, path, record_notes=False)
        n_kernels += sum(1 for k in fa.kernels if not k.helper)
        for d in fa.diagnostics:
            if d.severity > min_sev:
                continue
            counts[d.severity] = counts.get(d.severity, 0) + 1
            if args.format == "json":
                out_json.append(d.to_json(path))
            elif args.format == "full":
                print(render(d, text))
            else:
                print(d.format(path=path))
                if d.hint and not args.no_hints:
                    print(f"  hint: {d.hint}")
    n_err = counts[Severity.ERROR] + unreadable
    if args.format == "json":
        json.dump(out_json, sys.stdout, indent=1)
        print()
    else:
        summary = (f"checked {_plural(n_files, 'file')}, {_plural(n_kernels, 'kernel')}: "
                   f"{_plural(counts[Severity.ERROR], 'error')}, {_plural(counts[Severity.WARNING], 'warning')}")
        if min_sev >= Severity.INFO:
            summary += f", {_plural(counts[Severity.INFO], 'note')}"
        if unreadable:
            summary += f" ({_plural(unreadable, 'file')} could not be read)"
        print(summary)
    return 1 if n_err else 0


def main(argv=None) -> int:
    import newt
    version = f"newt {newt.__version__}"
    parser = argparse.ArgumentParser(prog="newt", description="newt kernel tools")
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check the @newt.jit kernels of Python files without running them")
    c.add_argument("--version", action="version", version=version)
    c.add_argument("paths", nargs="+", help="files or directories")
    c.add_argument("--format", choices=("text", "full", "json"), default="text",
                   help="text: one line per diagnostic (and its hint); full: with the source line and a caret; "
                        "json: a JSON list")
    c.add_argument("--no-hints", action="store_true", help="text format: leave out the 'hint:' lines")
    c.add_argument("--min-severity", choices=("error", "warning", "info"), default="warning",
                   help="lowest severity to report (default: warning)")
    args = parser.parse_args(argv)
    if args.cmd == "check":
        return _check(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
