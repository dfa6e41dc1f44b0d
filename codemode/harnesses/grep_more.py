"""What some agents' grep does beyond ours: context lines around each match (Claude
Code's ``-A``/``-B``/``-C``, DeepSeek TUI's ``context_lines``) and patterns that span
lines (Claude Code's ``multiline``).

Both are built from our own tools (``read_file``, ``glob``) through the adapter's
``invoke``, so they read only what those tools may read: ignored, binary and huge files
stay out, and every read is the same checked call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from codemode.tools.context import ToolError

Invoke = Callable[[str, dict[str, object]], Awaitable[Any]]

# A multiline search reads whole files: at most this many, and this many bytes in all.
MAX_FILES = 2000
MAX_BYTES = 32 * 1024 * 1024
MAX_CONTEXT = 50
# Lines reported by one multiline search, whatever limit the model asks for.
MAX_MATCHES = 5000


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
    line where it starts, with that line's text.

    The pattern is RE2's, as the grep tool's is (linear time: no pattern can stall the
    session), and the matching runs in a worker thread, so the event loop stays free.
    """
    from codemode.tools.grep import compile_multiline

    pattern = compile_multiline(r["pattern"], bool(r.get("case_insensitive")))
    root = r.get("path") or "."
    named = False  # one file named outright, not a directory's files
    note = None  # why glob's list was not whole (a walk bound): said, never silent
    try:
        listed = await invoke("glob", {"pattern": r.get("glob") or "**/*", "path": root})
        paths = [m if isinstance(m, str) else m["path"] for m in listed["matches"]]
        note = listed.get("note")
    except ToolError:
        paths, named = [root], True  # a file, not a directory
    limit = int(r["limit"]) if r.get("limit") and int(r["limit"]) > 0 else 500
    limit = min(limit, MAX_MATCHES)
    matches: list[dict[str, Any]] = []
    searched = total = 0
    truncated = len(paths) > MAX_FILES or bool(note)
    stop = threading.Event()
    try:
        for path in paths[:MAX_FILES]:
            try:
                # read_file takes regular files only, up to its byte cap: no device,
                # FIFO or socket is ever opened for reading here.
                text = (await invoke("read_file", {"path": path}))["content"]
            except ToolError as exc:
                # A file named outright that is not a regular file (a device, a FIFO),
                # missing or too big is refused, as grep refuses it; in a tree, grep
                # passes over such files, and over binary ones everywhere.
                if named and "binary" not in str(exc):
                    raise ToolError("grep: " + str(exc).removeprefix("read_file: ")) from None
                continue
            data = text.encode("utf-8", "surrogatepass")
            if total + len(data) > MAX_BYTES:
                truncated = True
                break
            searched += 1
            total += len(data)
            room = limit - len(matches)
            found = await asyncio.to_thread(_starts, pattern, data, room + 1, stop)
            for line, shown in found[:room]:
                matches.append({"path": path, "line": line, "text": shown})
            if len(found) > room:
                truncated = True
                break
    finally:
        stop.set()  # a cancelled await: the worker stops at its next match
    result = {"matches": matches, "truncated": truncated, "files_searched": searched}
    return {**result, "note": note} if note else result


def _starts(
    pattern: Any, data: bytes, most: int, stop: threading.Event
) -> list[tuple[int, str]]:
    """(line number, that line's text) of each line where a match starts, for the first
    ``most`` such lines (the lines are found as the grep tool finds them)."""
    from codemode.tools.grep import MAX_LINE_CHARS, matching_line_spans

    out: list[tuple[int, str]] = []
    if most <= 0:
        return out
    for number, start, end in matching_line_spans(data, pattern, stop):
        # Only the shown part of a long line is decoded (4 bytes a character at most).
        line = data[start : min(end, start + 4 * MAX_LINE_CHARS)].rstrip(b"\r")
        out.append((number, line.decode("utf-8", "ignore")[:MAX_LINE_CHARS]))
        if len(out) >= most:
            break
    return out
