"""Prints an e2e report (the probe's or Neovim's JSON, plus the browser's UI checks) and fails on any failure.

Usage: python summarize.py NAME REPORT_JSON [UI_JSON]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(path: str) -> dict:
    p = Path(path)
    if not p.exists():
        return {"checks": [{"name": f"report {path}", "ok": False, "error": "not written"}]}
    return json.loads(p.read_text())


def _detail(check: dict) -> str:
    rest = {k: v for k, v in check.items() if k not in ("name", "ok", "ms")}
    text = json.dumps(rest, indent=2, default=str)
    return "\n".join("        " + line for line in text.splitlines()[:80])


def main(argv: list[str]) -> int:
    name, paths = argv[0], argv[1:]
    checks = []
    for path in paths:
        report = _load(path)
        checks.extend(report.get("checks", []))
        if report.get("error"):
            checks.append({"name": f"{Path(path).name}", "ok": False, "error": report["error"]})
    if not checks:
        checks.append({"name": "any check", "ok": False, "error": "the report has no checks"})
    failed = [c for c in checks if not c.get("ok")]
    for c in checks:
        ms = f" ({c['ms'] / 1000:.1f}s)" if isinstance(c.get("ms"), (int, float)) else ""
        print(f"  {'PASS' if c.get('ok') else 'FAIL'} [{name}] {c['name']}{ms}")
        if not c.get("ok"):
            print(_detail(c))
    print(f"  [{name}] {len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
