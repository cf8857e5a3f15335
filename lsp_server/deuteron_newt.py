"""The generated newt lines in deuteron (and Helion) value hovers.

deuteron generates readable newt whose statements carry ``# line N: <the user's statement>`` comments
(``deuteron.codegen``): :func:`newt_lines_by_user_line` reads that map back from the generated source.  Generating
it means tracing the kernel, which runs the file's host code, so it happens only in the run worker (the
``dt_newt`` method of ``lsp_server.worker``, the process Verify and Compile use), only in a trusted workspace,
in the background (a hover never waits for it) and once per file content (:class:`GeneratedNewt`).  Until the
trace is there, or where the workspace is untrusted or the trace fails, hovers simply show no newt line.
Nothing here imports torch or deuteron.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict

__all__ = ["newt_lines_by_user_line", "GeneratedNewt", "MAX_LINES"]

log = logging.getLogger("newt-lsp")

MAX_LINES = 12  # generated lines shown for one statement (a chunk loop may re-materialize a value several times)
_ORIGIN = re.compile(r"^(\s*)# line (\d+): ")


def newt_lines_by_user_line(source: str) -> dict[int, list[str]]:
    """``{user line: [generated newt lines]}`` of a deuteron-generated module: the statements under each ``# line
    N:`` comment (up to the next such comment or a line indented less than it), their indentation relative to
    the comment's; a statement generated in several places (a chunk loop and the final store loop) has all of
    them, in order."""
    out: dict[int, list[str]] = {}
    cur: int | None = None
    indent = 0
    for raw in source.splitlines():
        m = _ORIGIN.match(raw)
        if m:
            cur, indent = int(m.group(2)), len(m.group(1))
            out.setdefault(cur, [])
            continue
        if cur is None or not raw.strip():
            continue
        lead = len(raw) - len(raw.lstrip())
        if lead < indent or raw.lstrip().startswith("#"):
            if lead < indent:
                cur = None
            continue
        out[cur].append(" " * (lead - indent) + raw.strip())
    return {k: v for k, v in out.items() if v}


class GeneratedNewt:
    """The generated newt of the files hovers asked about: ``(uri, hash(text))`` -> the run worker's ``dt_newt``
    answer (``{"lines": {"N": {"kernel", "newt", "with"}}, "errors": {...}}``); one background request per
    content, none in an untrusted workspace."""

    def __init__(self, max_entries: int = 16):
        self.max_entries = max_entries
        self.results: OrderedDict = OrderedDict()
        self.pending: dict = {}  # key -> asyncio.Task

    @staticmethod
    def _key(uri: str, text: str) -> tuple:
        return (uri, hash(text))

    @staticmethod
    def wanted(text: str) -> bool:
        """Only files that may hold deuteron / Helion kernels are traced."""
        return "deuteron" in text or "helion" in text

    def get(self, uri: str, text: str) -> dict | None:
        got = self.results.get(self._key(uri, text))
        if got is not None:
            self.results.move_to_end(self._key(uri, text))
        return got

    def ensure(self, uri: str, text: str, path: str, trusted: bool, request) -> None:
        """Start the trace of this content in the background (``request(method, params)``: the run worker's
        request, awaited in a task of its own) unless it is there, running, untrusted or no deuteron file."""
        if not trusted or not self.wanted(text):
            return
        key = self._key(uri, text)
        if key in self.results or any(k[0] == uri for k in self.pending):
            return  # (one trace of a document at a time: typing and hovering queue no trace per keystroke)
        self.pending[key] = asyncio.ensure_future(self._run(key, path, text, request))

    async def _run(self, key, path: str, text: str, request) -> None:
        try:
            res = await request("dt_newt", {"path": path, "text": text})
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a file that does not import, a worker that died: no newt lines, said once
            log.info("generated newt of %s: %s", path, e)
            res = {"lines": {}, "errors": {"": str(e)}}
        finally:
            self.pending.pop(key, None)
        self.results[key] = res if isinstance(res, dict) else {"lines": {}}
        while len(self.results) > self.max_entries:
            self.results.popitem(last=False)

    def section(self, uri: str, text: str, line: int, markdown: bool) -> str | None:
        """The hover section of the 1-based user ``line``: the newt lines it became, or None."""
        res = self.get(uri, text)
        entry = ((res or {}).get("lines") or {}).get(str(line))
        if not entry or not entry.get("newt"):
            return None
        lines = list(entry["newt"])
        more = len(lines) - MAX_LINES
        if more > 0:
            lines = lines[:MAX_LINES] + [f"# ... {more} more generated line{'s' if more > 1 else ''}"]
        how = f"generated newt ({entry.get('kernel')}, traced with {entry.get('with')})"
        body = "\n".join(lines)
        return f"{how}:\n```python\n{body}\n```" if markdown else f"{how}:\n{body}"

    def decorate(self, hover, uri: str, text: str, line: int, markdown: bool):
        """``hover`` (an ``lsp.Hover`` or its JSON) with the newt lines of ``line`` appended; as it is where there
        are none (or no hover)."""
        if hover is None:
            return None
        extra = self.section(uri, text, line, markdown)
        if extra is None:
            return hover
        sep = "\n\n---\n\n" if markdown else "\n\n"
        if isinstance(hover, dict):
            contents = hover.get("contents")
            if isinstance(contents, dict) and isinstance(contents.get("value"), str):
                return dict(hover, contents=dict(contents, value=contents["value"] + sep + extra))
            return hover
        contents = getattr(hover, "contents", None)
        if contents is not None and isinstance(getattr(contents, "value", None), str):
            contents.value = contents.value + sep + extra
        return hover
