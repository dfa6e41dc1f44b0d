"""A journal as a unified diff for the report, bounded.

Text files get a unified diff (``git diff`` shaped headers); binary files, symlinks and
files over ``TEXT_BYTES`` one line saying they differ, so a 20 MB file costs no 20 MB
diff. The whole text is capped at ``cap`` characters, head and tail kept.
"""

from __future__ import annotations

import difflib
import stat
from pathlib import Path

from codemode.batch.changes import Change
from codemode.hostfs.writer import Writer
from codemode.tool_terms.errors import ToolError
from codemode.tools.dry_run import NO_NEWLINE

TEXT_BYTES = 1_000_000
DIFF_CHARS = 50_000


def _old(repo: Writer, change: Change) -> tuple[int, bytes | None]:
    """The size of the file the repository holds at the change's path, and its bytes
    when there are few enough to diff. Read from its folder's descriptor, no link
    followed, never more than ``TEXT_BYTES``: a script that deletes a terabyte sparse
    file must not have the worker read a terabyte of zeros into memory to diff it."""
    if change.base is None or not change.base.startswith("file:"):
        return 0, None
    try:
        with repo.spot(change.path) as spot:
            st = spot.lstat()
        if st is None or not stat.S_ISREG(st.st_mode):
            return 0, None
        if st.st_size > TEXT_BYTES:
            return st.st_size, None
        _, data, _ = repo.look(change.path, most=TEXT_BYTES)
    except (OSError, ToolError):
        return 0, None
    return len(data or b""), data


def _text(data: bytes | None) -> list[str] | None:
    """``data`` as lines, or None when it is not text worth diffing."""
    if data is None:
        return []
    if len(data) > TEXT_BYTES or b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines(keepends=True)


def render(base: Path, changes: list[Change], cap: int = DIFF_CHARS) -> str:
    """The unified diff of ``changes`` against the repository at ``base``, capped."""
    parts: list[str] = []
    repo = Writer(base)
    for change in changes:
        if change.kind in ("mkdir", "rmdir"):
            continue
        name = change.path
        old_size, old = _old(repo, change)
        created, removed = change.base is None, change.kind == "deleted"
        parts.append(f"diff --git a/{name} b/{name}\n")
        if created:
            parts.append("new file\n")
        elif removed:
            parts.append("deleted file\n")
        if change.kind == "symlink" or (change.base or "").startswith("link:"):
            parts.append(f"symbolic link changed: {name}\n")
            continue
        new = None if removed else change.data
        if max(old_size, len(new or b"")) > TEXT_BYTES:
            sizes = f"{old_size} -> {len(new or b'')} bytes"
            parts.append(f"Large files a/{name} and b/{name} differ ({sizes}, not diffed)\n")
            continue
        old_lines, new_lines = _text(old), _text(new)
        if old_lines is None or new_lines is None:
            parts.append(f"Binary files a/{name} and b/{name} differ\n")
            continue
        before = "/dev/null" if created else f"a/{name}"
        after = "/dev/null" if removed else f"b/{name}"
        for line in difflib.unified_diff(old_lines, new_lines, before, after):
            parts.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
        if sum(len(p) for p in parts) > cap * 2:
            parts.append("[... further files not diffed ...]\n")
            break
    return cap_text("".join(parts), cap, "diff")


def cap_text(text: str, cap: int, what: str) -> str:
    """``text`` whole up to ``cap`` characters; beyond, its head and tail with the
    middle marked."""
    if len(text) <= cap:
        return text
    head, tail = cap - cap // 2, cap // 2
    elided = len(text) - head - tail
    return f"{text[:head]}\n[... {elided} characters of the {what} elided ...]\n{text[-tail:]}"
