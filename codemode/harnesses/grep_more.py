"""What some agents' grep does beyond ours: context lines around each match (Claude
Code's ``-A``/``-B``/``-C``, DeepSeek TUI's ``context_lines``) and patterns that span
lines (Claude Code's ``multiline``).

Both are built from our own tools (``read_file``, ``glob``) through the adapter's
``invoke``, so they read only what those tools may read: ignored, binary and huge files
stay out, and every read is the same checked call.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from codemode.tools.context import ToolError

Invoke = Callable[[str, dict[str, Any]], Awaitable[Any]]

# A multiline search reads whole files: at most this many, and this many bytes in all.
MAX_FILES = 2000
MAX_BYTES = 32 * 1024 * 1024
MAX_CONTEXT = 50


async def _lines(path: str, invoke: Invoke, cache: dict[str, list[str] | None]) -> list[str] | None:
    if path not in cache:
        try:
            cache[path] = (await invoke("read_file", {"path": path}))["content"].splitlines()
        except ToolError:
            cache[path] = None
    return cache[path]


async def context_lines(
    matches: list[dict[str, Any]], before: int, after: int, invoke: Invoke
) -> list[dict[str, Any]]:
    """The lines within ``before``/``after`` of each match that are not matches
    themselves, as ``{path, line, text}`` in file and line order."""
    before, after = min(max(before, 0), MAX_CONTEXT), min(max(after, 0), MAX_CONTEXT)
    hits: dict[str, set[int]] = {}
    for m in matches:
        hits.setdefault(m["path"], set()).add(int(m["line"]))
    cache: dict[str, list[str] | None] = {}
    out = []
    for path, lines_hit in hits.items():
        lines = await _lines(path, invoke, cache)
        if lines is None:
            continue
        wanted: set[int] = set()
        for n in lines_hit:
            wanted.update(range(max(1, n - before), min(len(lines), n + after) + 1))
        for n in sorted(wanted - lines_hit):
            out.append({"path": path, "line": n, "text": lines[n - 1]})
    return out


async def multiline_grep(r: dict[str, Any], invoke: Invoke) -> dict[str, Any]:
    """Search whole files with ``.`` matching newlines; each match is reported at the
    line where it starts, with that line's text."""
    flags = re.MULTILINE | re.DOTALL | (re.IGNORECASE if r.get("case_insensitive") else 0)
    try:
        pattern = re.compile(r["pattern"], flags)
    except re.error as exc:
        raise ToolError(f"grep: invalid regular expression: {exc}") from None
    root = r.get("path") or "."
    try:
        listed = await invoke("glob", {"pattern": r.get("glob") or "**/*", "path": root})
        paths = [m if isinstance(m, str) else m["path"] for m in listed["matches"]]
    except ToolError:
        paths = [root]  # a file, not a directory
    limit = int(r["limit"]) if r.get("limit") and int(r["limit"]) > 0 else 500
    matches: list[dict[str, Any]] = []
    searched = total = 0
    truncated = len(paths) > MAX_FILES
    for path in paths[:MAX_FILES]:
        try:
            text = (await invoke("read_file", {"path": path}))["content"]
        except ToolError:
            continue  # binary, too big, unreadable: grep passes over it too
        searched += 1
        total += len(text)
        for found in pattern.finditer(text):
            line = text.count("\n", 0, found.start()) + 1
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.start())
            matches.append(
                {"path": path, "line": line, "text": text[start : end if end >= 0 else None]}
            )
            if len(matches) >= limit:
                return {"matches": matches, "truncated": True, "files_searched": searched}
        if total > MAX_BYTES:
            truncated = True
            break
    return {"matches": matches, "truncated": truncated, "files_searched": searched}
