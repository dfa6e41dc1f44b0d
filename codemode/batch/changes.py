"""What a script changed in its copy, as a binary-safe journal, and applying it.

``compute(base, work)`` compares the repository (``base``) with the copy the script
ran in (``work``, see ``workcopy.py``) and lists every file, symlink and directory that
differs: new contents as bytes, so binary files travel as they are. Each entry names
what the repository held before (a SHA-256 of the file, or of a link's target), and
``apply`` refuses the whole journal when the repository no longer holds that (someone
changed it while the batch ran). ``applying.apply`` applies a journal all or nothing,
a kill -9 of the driver included; ``check`` refuses one that leaves the repository.

VCS metadata (``.git``, ``.hg``, ...) is never part of a journal: what a script does to
its copy's ``.git`` (an index, a commit) stays in the copy.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path, PurePosixPath
from typing import Literal

from codemode.batch.workcopy import VCS_DIRS
from codemode.hostfs.fingerprint import chunks, fingerprint

Kind = Literal["file", "symlink", "deleted", "mkdir", "rmdir"]

# The most new bytes one journal may carry. It travels whole, in memory, from the worker
# to the driver (pickled: twice, for a moment), and the driver holds it until it is
# applied: a script that wrote more (a multi-gigabyte file, sparse so that it cost no
# disk) would otherwise have the host hold all of it.
JOURNAL_BYTES = 1 << 30


class TooLarge(ValueError):
    """What a script wrote is more than a journal may carry (``JOURNAL_BYTES``)."""


@dataclass(frozen=True)
class Change:
    """One path's change; ``path`` is relative to the repository, in POSIX form."""

    path: str
    kind: Kind
    data: bytes = b""  # a file's new contents; a symlink's target (os.fsencode)
    executable: bool = False
    base: str | None = None  # fingerprint of what the repository held; None: nothing


class ApplyError(RuntimeError):
    """The journal could not be applied; the repository is as it was."""


@dataclass(frozen=True)
class _Entry:
    kind: Literal["file", "symlink", "dir"]
    st: os.stat_result


def _walk(root: Path) -> dict[str, _Entry]:
    """Every file, symlink and directory under ``root`` (VCS metadata left out)."""
    found: dict[str, _Entry] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError:
            continue
        for entry in entries:
            if entry.name in VCS_DIRS:
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                found[path] = _Entry("symlink", st)
            elif stat.S_ISDIR(st.st_mode):
                found[path] = _Entry("dir", st)
                stack.append(path)
            elif stat.S_ISREG(st.st_mode):
                found[path] = _Entry("file", st)
    return found


def _exec_bit(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_IXUSR)


def compute(base: Path, work: Path) -> list[Change]:
    """The journal that turns ``base`` into ``work``: deletions (deepest first), then
    new directories (shallowest first), then files and symlinks."""
    before, after = _walk(base), _walk(work)
    budget = JOURNAL_BYTES  # new bytes the journal may still take (TooLarge past it)
    deleted: list[Change] = []
    made: list[Change] = []
    written: list[Change] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and _same(base / path, old, work / path, new):
            continue
        if old is not None and (new is None or new.kind != old.kind or old.kind != "dir"):
            if old.kind == "dir":
                if new is None or new.kind != "dir":
                    deleted.append(Change(path, "rmdir"))
            elif new is None or new.kind == "dir":
                deleted.append(Change(path, "deleted", base=fingerprint(base / path)))
        if new is None:
            continue
        if new.kind == "dir":
            if old is None or old.kind != "dir":
                made.append(Change(path, "mkdir"))
            continue
        old_print = fingerprint(base / path) if old is not None and old.kind != "dir" else None
        if new.kind == "symlink":
            target = os.fsencode(os.readlink(work / path))
            written.append(Change(path, "symlink", target, base=old_print))
        else:
            data = _read(work, path, new.st, budget)
            budget -= len(data)
            written.append(Change(path, "file", data, _exec_bit(new.st), base=old_print))
    deleted.sort(key=lambda c: c.path.count("/"), reverse=True)
    made.sort(key=lambda c: c.path.count("/"))
    return deleted + made + written


def _read(work: Path, path: str, st: os.stat_result, budget: int) -> bytes:
    """The bytes of ``path`` in the copy; TooLarge (before reading, or once it grew past
    that) when they are more than ``budget``."""
    kept: list[bytes] = []
    size = st.st_size
    if size <= budget:
        size = 0
        for chunk in chunks(work / path):  # (it may have grown since the walk)
            size += len(chunk)
            if size > budget:
                break
            kept.append(chunk)
    if size > budget:
        raise TooLarge(f"the changes are too large to apply: more than {JOURNAL_BYTES >> 20} "
                       f"MiB of new file contents (at {path})")  # fmt: skip
    return b"".join(kept)


def _same(a: Path, old: _Entry, b: Path, new: _Entry) -> bool:
    if old.kind != new.kind:
        return False
    if old.kind == "dir":
        return True
    if old.kind == "symlink":
        return os.readlink(a) == os.readlink(b)
    if _exec_bit(old.st) != _exec_bit(new.st) or old.st.st_size != new.st.st_size:
        return False
    if old.st.st_mtime_ns == new.st.st_mtime_ns:
        return True  # the copy keeps timestamps; a write changes them
    # A MiB at a time: a large file touched but not changed costs no memory.
    return all(x == y for x, y in zip_longest(chunks(a), chunks(b)))


def changed_files(changes: list[Change]) -> list[str]:
    """The files and symlinks a journal writes or deletes, sorted."""
    return sorted(c.path for c in changes if c.kind in ("file", "symlink", "deleted"))


# --- applying -----------------------------------------------------------------------


def _check_path(rel: str) -> None:
    """Refuse a path that leaves the repository or enters VCS metadata (a journal from
    a Ray worker is checked like any input)."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or not pure.parts or any(p in ("..", ".", "") for p in pure.parts):
        raise ApplyError(f"refusing the path {rel!r}")
    if any(part in VCS_DIRS for part in pure.parts):
        raise ApplyError(f"refusing a change inside VCS metadata: {rel}")


def _check_link(change: Change, root: Path) -> None:
    """Refuse a symlink whose target leads outside the repository: in the repository it
    would be a door to the user's files (a script's copy lives elsewhere, so no link a
    script needs points out of it)."""
    target = os.fsdecode(change.data)
    if target.startswith("/"):
        norm = os.path.normpath(target)
        inside = norm == str(root) or norm.startswith(f"{root}/")
    else:
        where = os.path.normpath(os.path.join(os.path.dirname(change.path), target))
        inside = where != ".." and not where.startswith("../")
    if not inside:
        raise ApplyError(
            f"refusing {change.path}: a symlink that leads outside the repository (-> {target})"
        )


def check(root: Path, changes: list[Change]) -> None:
    """Refuse (ApplyError) a journal with a path outside the repository or in VCS
    metadata, or a symlink leading outside it; nothing is read or written."""
    root = root.resolve()
    for change in changes:
        _check_path(change.path)
        if change.kind == "symlink":
            _check_link(change, root)
