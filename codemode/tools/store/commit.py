"""Writing a set of changes (apply_patch's plan) to disk, all or nothing.

Every file is written to a temporary file in its own directory and renamed over the
target, so no file is ever seen half-written; each path is reached by the race-free walk
of ``codemode.tools.fs``. Each step leaves an undo action; if any
step fails, the steps already taken are undone in reverse (files restored from the
copies read while planning, created files and directories removed), so the workspace
ends as it started. Files are not fsynced: the guarantee is against failures of the
patch, not against power loss.

A file is replaced or removed only while it still holds what the plan read (and a new
one is created only where nothing has appeared meanwhile): a shell writing the same
file during the patch would otherwise lose its write to content computed from the
older text. It is compared under the held directory just before the rename.

Each path is also checked against the journal's entry for it (``journal_walk.reaches``)
once its folder is held: a folder on the way swapped for a symlink between the journal
and the commit fails the commit rather than sending the change where the link leads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import NoReturn

from codemode.hostfs.beneath import Spot, Tree, rmdir, unlink, write_atomic
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs.reading import NotRegular, TooBig, read_spot
from codemode.tools.store import MAX_READ_BYTES

# The records live in changes.py (the seam names them); their callers know them from here.
from codemode.tools.store.changes import Original as Original
from codemode.tools.store.changes import Removal as Removal
from codemode.tools.store.changes import Write as Write
from codemode.tools.store.journal import Entry, missing_dirs, tmp_for
from codemode.tools.store.journal_walk import reaches, real_roots


class CommitFailed(ToolError):
    """A commit that failed partway, after undoing what it had done: ``problems`` says
    what failed (and any file that could not be restored), ``partial`` whether some
    change could not be undone. apply_patch reports it as a PatchError."""

    def __init__(self, problems: list[str], *, partial: bool = False) -> None:
        self.problems = problems
        self.partial = partial
        super().__init__("\n\n".join(problems))


def commit(
    removals: Sequence[Removal],
    writes: Sequence[Write],
    originals: Mapping[Path, Original],
    tree: Tree,
    tag: str | None = None,
    journaled: Sequence[Entry] | None = None,
) -> None:
    """Remove then write files under ``tree``'s roots; on any failure undo what was done
    and raise PatchError. Every path is walked again from the roots' descriptors
    (``codemode.tools.fs``): a directory swapped for a symlink since the plan cannot
    send a write, or a removal, outside them. On any failure raises CommitFailed.
    ``tag`` names the temporary files (the journal's, ``journal_entries``);
    ``journaled``, the entries as the journal recorded them (``Recording.entries``, in
    the order of ``journal_entries``): each path must still be where its entry says."""
    undo: list[Callable[[], object]] = []
    current = ""
    entries = list(journaled) if journaled is not None else []
    if entries and len(entries) != len(removals) + len(writes):
        raise ValueError("the journal's entries are not this commit's")
    roots = real_roots(tree.roots if tree.roots is not None else [Path("/")])

    def as_journaled(i: int, spot: Spot, shown: str) -> None:
        # A folder on the way swapped for a link since the journal was written (a
        # command run beside the patch) would send this change where the link leads,
        # and a recovery after a kill would refuse it there: fail before acting.
        if entries and not reaches(roots, entries[i], spot):
            raise ToolError(
                f"a folder on the way to {shown} was replaced (by a symlink, or moved) "
                "since the patch began; nothing was written there"
            )

    try:
        for i, removal in enumerate(removals):
            current = removal.shown
            with tree.locate(removal.path, follow_last=False, shown=removal.shown) as spot:
                as_journaled(i, spot, removal.shown)
                _check_unchanged(spot, originals[removal.path], removal.shown)
                unlink(spot)
                where = _folder(spot)
            undo.append(
                partial(_restore, tree, removal.path, originals[removal.path], where, tag)
            )
        for j, write in enumerate(writes, start=len(removals)):
            current = write.shown
            created: list[Path] = []
            try:
                with tree.locate(
                    write.path, make_parents=True, created=created, shown=write.shown
                ) as spot:
                    as_journaled(j, spot, write.shown)  # (the folders it made: undone)
                    _check_unchanged(spot, originals.get(write.path), write.shown)
                    # New bytes never keep a set-id bit (``write_atomic``); an undo
                    # puts back the original's mode whole, with its own bytes.
                    write_atomic(spot, write.data, write.mode & 0o777, tag=tag)
                    where = _folder(spot)
            finally:
                for directory in created:
                    undo.append(partial(_rmdir, tree, directory, _folder_at(directory.parent)))
            original = originals.get(write.path)
            undo.append(
                partial(_restore, tree, write.path, original, where, tag)
                if original is not None
                else partial(_unlink, tree, write.path, where)
            )
    except (OSError, ToolError) as exc:
        roll_back(undo, current, exc)


def _check_unchanged(spot: Spot, original: Original | None, shown: str) -> None:
    """Raise ToolError unless the file at ``spot`` is as the plan read it: ``original``'s
    bytes, or (None) no file at all. A symlink removed is not looked through."""
    st = spot.lstat()
    if original is None:
        if st is not None:
            raise ToolError(f"{shown} was created by something else while the patch was applied")
        return
    if st is None:
        raise ToolError(f"{shown} was removed by something else while the patch was applied")
    if stat.S_ISLNK(st.st_mode):
        return
    try:
        now = read_spot(spot, MAX_READ_BYTES, shown)
    except (NotRegular, TooBig):
        now = None
    if now != original.data:
        raise ToolError(
            f"{shown} was changed by something else while the patch was applied; read it "
            "again and send the patch again"
        )


def roll_back(undo: list[Callable[[], object]], current: str, exc: BaseException) -> NoReturn:
    """Run the undo steps of a commit that failed writing ``current`` (newest first) and
    raise the CommitFailed that says so, naming any file that could not be restored."""
    failed = []
    for step in reversed(undo):
        try:
            step()
        except (OSError, ToolError) as undo_exc:
            failed.append(_reason(undo_exc, with_name=True))
    problem = f"Writing {current} failed: {_reason(exc)}."
    if not failed:
        raise CommitFailed([f"{problem} The files already written were restored."]) from None
    raise CommitFailed(
        [problem, "Restoring these files also failed; check them:\n" + "\n".join(failed)],
        partial=True,
    ) from None


def _reason(exc: BaseException, *, with_name: bool = False) -> str:
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return f"{exc.filename}: {reason}" if with_name and exc.filename else reason
    return str(exc)


# An undo step acts only in the folder its step acted in (its device and inode): a
# folder on the way swapped for a link since (a command beside the patch) would send
# the undo where the link leads, removing or overwriting a file the patch never
# touched. Such a step is left undone and named (``roll_back``).
Folder = tuple[int, int] | None


def _folder(spot: Spot) -> Folder:
    st = os.fstat(spot.parent)
    return st.st_dev, st.st_ino


def _folder_at(path: Path) -> Folder:
    try:
        st = os.stat(path)  # (as the walk that made it reached it: links followed)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _in_place(spot: Spot, where: Folder, path: Path) -> None:
    if where is None or _folder(spot) != where:
        raise ToolError(
            f"{path}: a folder on its way was replaced since the patch wrote there; "
            "left as it is"
        )


def _restore(
    tree: Tree, path: Path, original: Original, where: Folder, tag: str | None = None
) -> None:
    with tree.locate(path, make_parents=True) as spot:
        _in_place(spot, where, path)
        write_atomic(spot, original.data, original.mode, tag=tag)


def _unlink(tree: Tree, path: Path, where: Folder) -> None:
    with tree.locate(path, follow_last=False) as spot:
        _in_place(spot, where, path)
        unlink(spot)


def _rmdir(tree: Tree, path: Path, where: Folder) -> None:
    with tree.locate(path, follow_last=False) as spot:
        _in_place(spot, where, path)
        rmdir(spot)


def journal_entries(
    removals: Sequence[Removal],
    writes: Sequence[Write],
    originals: Mapping[Path, Original],
    roots: Sequence[Path],
    tag: str,
) -> list[Entry]:
    """What the journal records of a commit before it starts (``journal``): each path's
    state before, the digest of its state after, its temporary file, the folders a
    write will create. A removed symlink is recorded as the link it was."""
    entries: list[Entry] = []
    for removal in removals:
        path = journal_path(removal.path, roots)
        removed = originals[removal.path]
        link = None
        with contextlib.suppress(OSError):
            if os.path.islink(path):
                link = os.readlink(path)
        entries.append(
            Entry(path, before=removed.data, before_mode=removed.mode, before_link=link)
        )
    for write in writes:
        path = journal_path(write.path, roots)
        original = originals.get(write.path)
        entries.append(
            Entry(
                path,
                tmp=tmp_for(path, tag),
                before=None if original is None else original.data,
                before_mode=0o644 if original is None else original.mode,
                after=hashlib.sha256(write.data).hexdigest(),
                made_dirs=missing_dirs(path, roots),
            )
        )
    return entries


def journal_path(path: Path, roots: Sequence[Path]) -> Path:
    """``path`` as the journal names it: normalised, under one of ``roots`` (its folder
    resolved when only that puts it there)."""
    norm = Path(os.path.normpath(path))
    if any(norm.is_relative_to(r) for r in roots):
        return norm
    return Path(os.path.realpath(norm.parent)) / norm.name
