"""What a script changed in its copy, as a binary-safe journal, and applying it.

``compute(base, work)`` compares the repository (``base``) with the copy the script
ran in (``work``, see ``workcopy.py``) and lists every file, symlink and directory that
differs: new contents as bytes, so binary files travel as they are. Each entry names
what the repository held before (a SHA-256 of the file, or of a link's target), and
``apply`` refuses the whole journal when the repository no longer holds that (someone
changed it while the batch ran). ``apply`` is all or nothing: every file it replaces or
deletes is first renamed aside and kept until the end, so that a failure halfway (a
full disk, a permission) puts each one back.

VCS metadata (``.git``, ``.hg``, ...) is never part of a journal: what a script does to
its copy's ``.git`` (an index, a commit) stays in the copy.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from codemode.batch.workcopy import VCS_DIRS
from codemode.tools.fs.beneath import Spot, mkdir, symlink, write_atomic
from codemode.tools.fs.writer import Refused, Writer, default_mode

Kind = Literal["file", "symlink", "deleted", "mkdir", "rmdir"]


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


def fingerprint(path: Path) -> str | None:
    """What ``path`` holds, as a journal's ``base``: None when nothing (or a directory)."""
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
    if stat.S_ISREG(st.st_mode):
        return "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    if stat.S_ISDIR(st.st_mode):
        return None
    return "other"


def _exec_bit(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_IXUSR)


def compute(base: Path, work: Path) -> list[Change]:
    """The journal that turns ``base`` into ``work``: deletions (deepest first), then
    new directories (shallowest first), then files and symlinks."""
    before, after = _walk(base), _walk(work)
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
            data = (work / path).read_bytes()
            written.append(Change(path, "file", data, _exec_bit(new.st), base=old_print))
    deleted.sort(key=lambda c: c.path.count("/"), reverse=True)
    made.sort(key=lambda c: c.path.count("/"))
    return deleted + made + written


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
    return a.read_bytes() == b.read_bytes()


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


def _base_of(writer: Writer, rel: str) -> str | None:
    """``fingerprint`` of what the repository holds at ``rel``, walked with no link
    followed (a link on the way: nothing is there as far as the journal goes)."""
    try:
        st = writer.lstat(rel)
    except Refused:
        return None
    if st is None or stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + hashlib.sha256(os.fsencode(writer.readlink(rel))).hexdigest()
    if stat.S_ISREG(st.st_mode):
        return "file:" + hashlib.sha256(writer.read(rel)).hexdigest()
    return "other"


class _Undo:
    """The steps taken so far (through the writer), undone in reverse on failure."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.steps: list[tuple[str, str, str | None]] = []

    def rollback(self) -> None:
        for action, rel, aside in reversed(self.steps):
            try:
                if action == "moved-away" and aside is not None:
                    self.writer.remove(rel)
                    self.writer.rename(aside, rel)
                elif action == "created":
                    self.writer.remove(rel)
                elif action == "removed-dir":
                    self.writer.mkdir(rel)
            except (OSError, Refused):
                continue

    def discard_backups(self) -> None:
        for action, _rel, aside in self.steps:
            if action == "moved-away" and aside is not None:
                try:
                    self.writer.remove(aside)
                except (OSError, Refused):
                    continue


def check(root: Path, changes: list[Change]) -> None:
    """Refuse (ApplyError) a journal with a path outside the repository or in VCS
    metadata, or a symlink leading outside it; nothing is read or written."""
    root = root.resolve()
    for change in changes:
        _check_path(change.path)
        if change.kind == "symlink":
            _check_link(change, root)


def apply(root: Path, changes: list[Change]) -> None:
    """Apply ``changes`` to the repository at ``root``, all or nothing, through the
    host's one writer (``codemode.tools.fs.writer``): no symlink in the repository is
    followed, and every temporary or moved-aside name is random."""
    root = root.resolve()
    writer = Writer(root)
    check(root, changes)
    for change in changes:
        if change.kind not in ("file", "symlink", "deleted"):
            continue
        try:
            base = _base_of(writer, change.path)
        except OSError as exc:
            raise ApplyError(f"cannot read {change.path} in the repository: {exc}") from None
        if base != change.base:
            raise ApplyError(f"{change.path} changed in the repository while the batch ran")
    undo = _Undo(writer)
    try:
        for change in changes:
            _apply_one(change, writer, undo)
    except BaseException as exc:
        undo.rollback()
        if isinstance(exc, ApplyError):
            raise
        if isinstance(exc, Refused):
            raise ApplyError(f"{exc} (no symlink in the repository is followed)") from None
        if isinstance(exc, OSError):
            raise ApplyError(f"cannot apply the changes: {exc}") from None
        raise
    undo.discard_backups()


def _spot_making_parents(writer: Writer, rel: str, undo: _Undo) -> Spot:
    """``rel``'s spot, the folders missing on the way made (each one an undo step)."""
    made: list[Path] = []
    try:
        return writer.spot(rel, make_parents=True, created=made)
    finally:
        for path in made:
            undo.steps.append(("created", path.relative_to(writer.root).as_posix(), None))


def _apply_one(change: Change, writer: Writer, undo: _Undo) -> None:
    rel = change.path
    if change.kind == "rmdir":
        st = writer.lstat(rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            try:
                writer.rmdir(rel)
            except OSError:
                return  # not empty: it holds files the script never saw (ignored ones)
            undo.steps.append(("removed-dir", rel, None))
        return
    if change.kind == "mkdir":
        st = writer.lstat(rel)
        if st is None or not stat.S_ISDIR(st.st_mode):
            with _spot_making_parents(writer, rel, undo) as spot:
                mkdir(spot)
            undo.steps.append(("created", rel, None))
        return
    mode = default_mode()
    st = writer.lstat(rel)
    if st is not None:
        if stat.S_ISREG(st.st_mode):
            mode = stat.S_IMODE(st.st_mode)
        undo.steps.append(("moved-away", rel, writer.move_aside(rel, "bak")))
    if change.kind == "deleted":
        return
    with _spot_making_parents(writer, rel, undo) as spot:
        if change.kind == "symlink":
            symlink(spot, os.fsdecode(change.data))
        else:
            executable = (mode & 0o444) >> 2  # x wherever r is, as git checks files out
            bits = (mode | executable) if change.executable else (mode & ~0o111)
            write_atomic(spot, change.data, bits)
    undo.steps.append(("created", rel, None))
