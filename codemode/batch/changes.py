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
from pathlib import Path, PurePosixPath

from codemode.batch.compare import compute as by_descriptor
from codemode.batch.journal_entry import JOURNAL_BYTES, Change, Kind, TooLarge
from codemode.batch.workcopy import VCS_DIRS
from codemode.hostfs.fingerprint import fingerprint
from codemode.hostfs.writer import Refused, Writer


class ApplyError(RuntimeError):
    """The journal could not be applied; the repository is as it was."""


def compute(base: Path, work: Path) -> list[Change]:
    """The journal that turns ``base`` into ``work``: deletions (deepest first), then
    new directories (shallowest first), then files and symlinks; ``TooLarge`` past a
    bound (``compare.py``: a walk by descriptor, of any depth up to its bound)."""
    return by_descriptor(base, work)


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


# Components a journal's symlinks may take to resolve, all together (a repository
# lookup costs its depth): far more than a real tree's links need, and a bound on what a
# journal of links chained through deep folders can cost the driver.
_LINK_STEPS = 2_000_000
# Links followed in resolving one, as the kernel's ELOOP limit.
_LINK_HOPS = 40


class _Links:
    """Where the journal's symlinks lead once it is applied, each followed as the kernel
    would follow it: through the links the journal makes and those the repository
    holds. A target is not judged by its text alone: ``a/s -> ..`` and
    ``a/up -> s/..`` are each inside the repository as written, and ``up`` leads to
    the folder above it."""

    def __init__(self, root: Path, changes: list[Change]) -> None:
        self.root = root
        self.after = {c.path: c for c in changes}  # the last entry of a path is its end
        self.writer = Writer(root)
        self.seen: dict[str, str | None] = {}
        self.steps = _LINK_STEPS

    def check(self, change: Change) -> None:
        target = os.fsdecode(change.data)
        if not self._inside(change.path.split("/")[:-1], target):
            raise ApplyError(f"refusing {change.path}: a symlink that leads outside the "
                             f"repository (-> {target})")  # fmt: skip

    def _inside(self, at: list[str], target: str) -> bool:
        cur = list(at)
        pending = self._start(target, cur)
        if pending is None:
            return False
        hops = 0
        while pending:
            comp = pending.pop()
            self._step(1)
            if comp in ("", "."):
                continue
            if comp == "..":
                if not cur:
                    return False
                cur.pop()
                continue
            cur.append(comp)
            link = self._link_at(cur)
            if link is None:
                continue
            hops += 1
            if hops > _LINK_HOPS:
                return False  # the kernel gives up (ELOOP): no use for such a link
            cur.pop()
            more = self._start(link, cur)
            if more is None:
                return False
            pending.extend(more)
        return True

    def _start(self, target: str, cur: list[str]) -> list[str] | None:
        """The components of ``target`` still to walk, last first, ``cur`` moved to
        where the walk starts; None: an absolute target outside the repository."""
        if target.startswith("/"):
            top = str(self.root).rstrip("/") + "/"
            if not (target + "/").startswith(top):
                return None
            cur.clear()
            target = target[len(top) :]
        return target.split("/")[::-1]

    def _link_at(self, parts: list[str]) -> str | None:
        """The target of the symlink at ``parts`` once the journal is applied; None
        when something else (or nothing) is there."""
        path = "/".join(parts)
        change = self.after.get(path)
        if change is not None:
            return os.fsdecode(change.data) if change.kind == "symlink" else None
        if path not in self.seen:
            self._step(len(parts))
            try:
                with self.writer.spot(path) as spot:
                    st = spot.lstat()
                    link = None
                    if st is not None and stat.S_ISLNK(st.st_mode):
                        link = os.readlink(spot.name, dir_fd=spot.parent)
            except (Refused, OSError):
                link = None  # (a link on the way: the journal makes a folder of it)
            self.seen[path] = link
        return self.seen[path]

    def _step(self, cost: int) -> None:
        self.steps -= cost
        if self.steps < 0:
            raise ApplyError("the changes hold too many symlinks, or too deep, to check "
                             "where they lead: nothing applied")  # fmt: skip


def check(root: Path, changes: list[Change]) -> None:
    """Refuse (ApplyError) a journal with a path outside the repository or in VCS
    metadata, or a symlink leading outside it once applied; nothing is written."""
    root = root.resolve()
    for change in changes:
        _check_path(change.path)
    links = _Links(root, changes)
    for change in changes:
        if change.kind == "symlink":
            links.check(change)


__all__ = [
    "JOURNAL_BYTES", "ApplyError", "Change", "Kind", "TooLarge", "changed_files", "check",
    "compute", "fingerprint",
]  # fmt: skip
