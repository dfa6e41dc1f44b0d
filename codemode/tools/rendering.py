"""The built-in tools' results as the text a model reads in the classic dialect.

Structured results stay structured for code mode; a model reading them as a reply,
though, does better with familiar text: numbered file lines, ``path:line: text`` for
search hits, an exit code above command output. Each function is the ``render`` of one
tool's definition and takes that tool's JSON result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The most of a file read_file's text shows a model at once (its structured result, which
# code mode gets, is whole): a 20 MB file in one reply would overflow any context.
READ_TEXT_CHARS = 100_000


def shell(r: dict[str, object]) -> str:
    head = f"exit code: {r['exit_code']}" + (" (timed out)" if r.get("timed_out") else "")
    return f"{head}\n{r.get('output', '')}".rstrip("\n")


def read_file(r: dict[str, Any]) -> str:
    content: str = r["content"]
    # Lines as read_file counts them: only "\n" ends one (str.splitlines would also break
    # at a form feed or U+2028, and the numbers shown would drift from the file's). Only
    # as much as can be shown is split: a file of millions of short lines would
    # otherwise cost a string each.
    lines = [line.removesuffix("\r") for line in content[: READ_TEXT_CHARS + 1].split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    in_content = r["end_line"] - r["start_line"] + 1 if r["start_line"] else 0
    width = len(str(r["start_line"] + in_content))
    shown: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        numbered = f"{r['start_line'] + i:>{width}}\t{line}"
        if size + len(numbered) > READ_TEXT_CHARS:
            if not shown:  # one line longer than the whole budget: its start
                length = content.find("\n")
                shown.append(
                    numbered[:READ_TEXT_CHARS]
                    + f" [line cut: {length if length >= 0 else len(content)} characters in "
                    "all; read it with tools.grep or tools.shell]"
                )
            break
        shown.append(numbered)
        size += len(numbered) + 1
    body = "\n".join(shown)
    last = r["start_line"] + len(shown) - 1
    if len(shown) < in_content:
        body += (
            f"\n[lines {r['start_line']}-{last} of {r['total_lines']} shown, to keep this "
            f"reply short; continue with offset={last + 1}]"
        )
    elif r.get("truncated"):
        body += (
            f"\n[lines {r['start_line']}-{r['end_line']} of {r['total_lines']}; "
            f"continue with offset={r['end_line'] + 1}]"
        )
    encoding = r.get("encoding", "utf-8")
    if encoding.startswith("utf-") and encoding != "utf-8":
        body += (
            f"\n[{r['path']} is {encoding.upper()} text with a byte order mark; write_file, "
            "edit and apply_patch keep that encoding]"
        )
    elif encoding != "utf-8":
        body += (
            f"\n[{r['path']} is not valid UTF-8: read as {r['encoding']}, one character per "
            "byte; write_file and edit keep that encoding]"
        )
    return body or f"[{r['path']} is empty]"


def grep(r: dict[str, Any]) -> str:
    if r.get("context"):
        lines = _with_context(r["matches"], r["context"])
    else:
        lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in r["matches"]]
    kept = _within(lines, READ_TEXT_CHARS)
    if len(kept) < len(lines):
        lines = [*kept, f"[{len(lines) - len(kept)} more lines left out to keep this reply short]"]
    elif r.get("truncated"):
        lines.append("[more matches left out; narrow the pattern or raise max_results]")
    if r.get("latin1_files") and r["matches"]:
        lines.append(f"[not valid UTF-8, searched as Latin-1: {', '.join(r['latin1_files'])}]")
    return "\n".join(lines) or f"no matches ({r.get('files_searched', 0)} files searched)"


def _within(lines: list[str], budget: int) -> list[str]:
    """The first of ``lines`` that fit in ``budget`` characters, joined by newlines."""
    size = 0
    for i, line in enumerate(lines):
        size += len(line) + 1
        if size > budget:
            return lines[:i]
    return lines


def _with_context(matches: list[dict[str, Any]], context: list[dict[str, Any]]) -> list[str]:
    """Matches and their context lines as grep -C prints them: ``path:N: text`` for a
    match, ``path-N- text`` for context, ``--`` between groups that do not touch."""
    rows = [(m["path"], m["line"], ":", m["text"]) for m in matches]
    rows += [(c["path"], c["line"], "-", c["text"]) for c in context]
    order = {path: i for i, path in enumerate(dict.fromkeys(m["path"] for m in matches))}
    rows.sort(key=lambda row: (order.get(row[0], len(order)), row[1]))
    lines: list[str] = []
    last: tuple[str, int] | None = None
    for path, n, mark, text in rows:
        if last is not None and (last[0] != path or n > last[1] + 1):
            lines.append("--")
        lines.append(f"{path}{mark}{n}{mark} {text}")
        last = (path, n)
    return lines


def with_note(render: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
    """``render``'s text, and the result's ``note`` saying why it is incomplete after it
    in place of ``render``'s own truncation line (a search cut short must not read as a
    whole one)."""

    def rendered(r: dict[str, Any]) -> str:
        if not r.get("note"):
            return render(r)
        return f"{render({**r, 'truncated': False})}\n[{r['note']}]"

    return rendered


def glob(r: dict[str, Any]) -> str:
    lines = list(r["matches"])
    if r.get("truncated"):
        lines.append("[more files matched; narrow the pattern]")
    return "\n".join(lines) or "no files matched"


def apply_patch(r: dict[str, Any]) -> str:
    marks = {"add": "A", "update": "M", "delete": "D", "move": "R"}
    lines = []
    for change in r.get("changes", []):
        mark = marks.get(change.get("kind", ""), "?")
        target = change.get("move_to") or change.get("to")
        path = change.get("path") or change.get("from")
        lines.append(f"{mark} {path}" + (f" -> {target}" if target else ""))
    return "patch applied:\n" + "\n".join(lines) if lines else "patch applied (no changes)"


def list_dir(r: dict[str, Any]) -> str:
    listed = "\n".join(e["path"] + ("/" if e["type"] == "dir" else "") for e in r["entries"])
    # A cut listing says so: the model would otherwise take it for the whole folder.
    note = f"({r['note']})" if r.get("note") else ""
    return "\n".join(p for p in (listed, note) if p) or "(empty directory)"


def edit(r: dict[str, object]) -> str:
    return f"Edited {r['path']} ({r['replacements']} replacement(s))."


def write_file(r: dict[str, object]) -> str:
    verb = "Created" if r.get("created") else "Wrote"
    return f"{verb} {r['path']} ({r['bytes_written']} bytes)."


def update_plan(r: dict[str, object]) -> str:
    return str(r.get("message", "Todo list updated."))
