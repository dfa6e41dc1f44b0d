"""Where a journal entry's path is: fixed when the journal is written, walked again by its
recovery without following any link (``journal``).

A file tool writes through the links it meets inside the writable roots (``src`` ->
``lib`` sends ``src/a.py`` to ``lib/a.py``), so the path as the patch named it is not
where the bytes went. When the journal is written, ``anchored`` walks each path as the
commit will (links followed, within the roots) to the deepest folder on its way that
exists, and records that folder with every link resolved (``base``) and its device and
inode (``base_id``); the path and the folders the commit will make are recorded below
it. A writer that follows no link (a batch, /undo) is walked as it writes
(``follow=False``): the walk stops at a link, and that link is recorded (``way_link``):
the writer is refused there, so a recovery meeting the same link passes it, silent.
The folders above an entry that this journal itself changes (a link the commit
replaces or removes, then makes a folder in its place) are not walked into: the write
lands in the folder made there.

A recovery (``reach``) opens ``base`` from its root one component at a time with no
link followed, checks that it is still the folder recorded, then walks the rest the same
way. A link a program planted on the way since (``src`` -> ``other``, the folder itself
renamed and another put in its place) makes the entry ``Blocked`` or ``Moved``: it is
left as it is and said, never acted on where the link leads. An older journal, without
``base``, is walked from its root the same way.

The commit itself checks each path against its entry before it writes or removes it
(``reaches``): a folder swapped for a link (within the roots) after the journal was
written and before the commit walked it would send the write where the link leads,
which a recovery then refuses, leaving a mix of before and after; the commit fails
instead, and its own rollback leaves the whole before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import stat
from collections.abc import Collection, Sequence
from pathlib import Path

from codemode.hostfs.beneath import Missing, Refusal, Refused, Spot, Tree, mkdir
from codemode.tool_terms.errors import ToolError
from codemode.tools.store.journal_format import Entry

_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Ident = tuple[int, int]


class Blocked(ToolError):
    """A link is on the entry's way now (``link``, pointing at ``target``)."""

    def __init__(self, link: Path, target: str) -> None:
        self.link, self.target = link, target
        super().__init__(f"{link} is a symlink now")


class Moved(ToolError):
    """The folder the journal recorded was replaced (another is at its path now)."""


def real_roots(roots: Sequence[Path]) -> list[Path]:
    """The roots, resolved, deepest first (a path is taken under the deepest)."""
    return sorted({Path(os.path.realpath(r)) for r in roots}, key=lambda r: -len(r.parts))


def root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    for root in roots:
        if path == root or path.is_relative_to(root):
            return root
    return None


# --- when the journal is written ------------------------------------------------------


def anchored(
    roots: Sequence[Path], entries: Sequence[Entry], *, follow: bool = True
) -> list[Entry]:
    """``entries`` with ``base`` and ``base_id`` set, and their paths and made folders
    rewritten below the base (see the module docstring). The entries given are not
    changed. ``follow``: whether the writer follows links within the roots (the file
    tools) or none (a batch, /undo: the walk stops at a link, recorded as ``way_link``)."""
    resolved = real_roots(roots)
    tree = Tree(resolved, follow=follow)  # as the writer will walk
    touched = {e.path for e in entries} | {d for e in entries for d in e.made_dirs}
    out: list[Entry] = []
    for entry in entries:
        root = root_of(entry.path, resolved)
        if root is None or entry.path == root:
            out.append(entry)  # refused by the walk anyway (and by ``decode``)
            continue
        if entry.removed_dir or entry.parent_dirs:
            # Their writers (/undo, a batch) follow no link, and may remove then make
            # again the folders above: walked from the root, no identity held but its.
            named, real, ident = root, root, _ident_of_root(root)
        else:
            named, real, ident = _deepest(tree, root, entry.path, touched)
        way = None if follow else _link_at(named, entry.path)
        out.append(
            dataclasses.replace(
                entry,
                path=_below(entry.path, named, real),
                made_dirs=[_below(d, named, real) for d in entry.made_dirs],
                base=real,
                base_id=ident,
                way_link=way,
            )
        )
    return out


def _link_at(base: Path, path: Path) -> tuple[Path, str] | None:
    """The link (and its target) that stopped a walk following no link at ``base`` on
    ``path``'s way, if the next folder is one. Only what a recovery says depends on it
    (it never walks through a link): a path past PATH_MAX is simply not recorded."""
    parts = path.relative_to(base).parts if path.is_relative_to(base) else ()
    if len(parts) < 2:
        return None
    with contextlib.suppress(OSError, ValueError):
        return base / parts[0], os.readlink(base / parts[0])
    return None


def _below(path: Path, named: Path, real: Path) -> Path:
    return real / path.relative_to(named) if path.is_relative_to(named) else path


def _ident_of_root(root: Path) -> Ident | None:
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _probe(tree: Tree, folder: Path) -> tuple[Path, os.stat_result] | None:
    """Where the folder ``folder`` is, links resolved, and its stat; None if it is not a
    folder there (missing, a file, a link out of the roots)."""
    try:
        with tree.locate(folder, follow_last=True) as spot:
            st = spot.lstat()
            real = spot.real
    except (OSError, ToolError):
        return None
    return (real, st) if st is not None and stat.S_ISDIR(st.st_mode) else None


def _deepest(
    tree: Tree, root: Path, path: Path, touched: Collection[Path]
) -> tuple[Path, Path, Ident | None]:
    """The deepest folder above ``path`` that exists (as named, resolved) and its
    identity. Found by halving: a folder exists only if the ones above it do, and each
    look is one walk (a path thousands deep costs a dozen walks, not thousands)."""
    above = [a for a in reversed(path.parents) if a != root and a.is_relative_to(root)]
    for i, folder in enumerate(above):
        if folder in touched:
            above = above[:i]  # the commit changes it: nothing below it exists yet
            break
    best: tuple[Path, Path, Ident | None] = (root, root, _ident_of_root(root))
    lo, hi = -1, len(above)
    if above:
        found = _probe(tree, above[-1])
        if found is not None:
            return above[-1], found[0], (found[1].st_dev, found[1].st_ino)
        hi = len(above) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = _probe(tree, above[mid])
        if found is None:
            hi = mid
        else:
            lo = mid
            best = (above[mid], found[0], (found[1].st_dev, found[1].st_ino))
    return best


def missing_dirs(path: Path, roots: Sequence[Path]) -> list[Path]:
    """The folders above ``path`` (below its root, as named) that do not exist yet,
    shallowest first: a write there will create them. Looked at by descriptor (a path
    of any length; ``os.path.lexists`` says False past PATH_MAX, and a rollback then
    removed folders that were there before). Whatever cannot be looked at (a link out
    of the roots, a folder that keeps changing) counts as there: a rollback removes
    fewer folders, never one it did not make."""
    path = Path(os.path.normpath(path))
    given = [Path(os.path.normpath(r)) for r in roots]
    below = [r for r in given if path.is_relative_to(r) and path != r]
    if not below:
        return []
    named_root = max(below, key=lambda r: len(r.parts))
    root = Path(os.path.realpath(named_root))
    tree = Tree([root])
    above = [a for a in reversed(path.parents) if a != named_root and a.is_relative_to(named_root)]

    def there(folder: Path) -> bool:
        try:
            with tree.locate(root / folder.relative_to(named_root), follow_last=False) as spot:
                return spot.lstat() is not None
        except (Missing, NotADirectoryError):
            return False
        except (OSError, ToolError):
            return True

    lo, hi = -1, len(above)  # above[: lo + 1] are there, above[hi:] are not
    if above and there(above[-1]):
        return []
    hi = len(above) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if there(above[mid]):
            lo = mid
        else:
            hi = mid
    return above[lo + 1 :]


# --- when it is recovered -------------------------------------------------------------


def reach(
    roots: Sequence[Path],
    entry: Entry,
    path: Path,
    *,
    refuse: Refusal | None = None,
    make_parents: bool = False,
) -> Spot:
    """The held folder of ``path`` (the entry's own, or one of its made folders) and
    its last name, walked from the entry's base (its root for an older journal) with
    no link followed. Raises Blocked (a link on the way), Moved (the base is another
    folder now), Missing, NotADirectoryError, Refused (a protected name)."""
    root = root_of(path, roots)
    if root is None or path == root:
        raise Refused(f"refusing to restore {path}: outside the journal's roots")
    if refuse is not None and (reason := refuse(list(path.relative_to(root).parts))):
        raise Refused(f"refusing to restore {path}: {reason}")
    start, ident = root, None
    base = entry.base
    if base is not None and path.is_relative_to(base) and path != base:
        start, ident = base, entry.base_id
    fd = _walk(root, list(start.relative_to(root).parts), make_parents=False)
    if ident is not None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != ident:
            os.close(fd)
            raise Moved(f"{start} is another folder now (moved or replaced since)")
    parts = list(path.relative_to(start).parts)
    inner = _walk(start, parts[:-1], make_parents=make_parents, fd=fd)  # (closes fd)
    return Spot(inner, parts[-1], start, parts)


def reaches(roots: Sequence[Path], entry: Entry, spot: Spot) -> bool:
    """Whether a recovery of ``entry`` (``reach``: from its recorded folder, identity
    checked, no link followed) would land where the commit holds ``spot``: the same
    folder, by device and inode, and the same name. False when a folder on the way was
    swapped for a link, moved or replaced since the journal was written. An entry with
    no recorded folder (outside the roots, an older journal) has nothing to compare."""
    if entry.base is None:
        return True
    try:
        with reach(roots, entry, entry.path) as there:
            held, walked = os.fstat(spot.parent), os.fstat(there.parent)
            same = (held.st_dev, held.st_ino) == (walked.st_dev, walked.st_ino)
            return same and there.name == spot.name
    except (OSError, ToolError):
        return False


def _walk(top: Path, parts: list[str], *, make_parents: bool, fd: int = -1) -> int:
    """The folder ``top/parts`` opened (``O_PATH``), each component with no link
    followed; ``fd``, an open ``top``, is used (and closed once passed)."""
    if fd < 0:
        fd = os.open(top, _DIR & ~os.O_NOFOLLOW)  # a root: a real path, as the journal's
    done: list[str] = []
    tries = 0
    while len(done) < len(parts):
        comp = parts[len(done)]
        try:
            inner = os.open(comp, _DIR, dir_fd=fd)
        except FileNotFoundError:
            if not make_parents or tries > 100:
                os.close(fd)
                where = str(top.joinpath(*done, comp))
                raise Missing(errno.ENOENT, "no such directory", where) from None
            tries += 1
            with contextlib.suppress(FileExistsError):
                mkdir(Spot(fd, comp, top, [*done, comp]))
            continue
        except OSError as exc:
            here = top.joinpath(*done, comp)
            try:
                st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
                target = os.readlink(comp, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
            except OSError:
                target = None
            os.close(fd)
            if target is not None:
                raise Blocked(here, target) from None
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(here)) from None
            raise
        os.close(fd)
        fd = inner
        done.append(comp)
    return fd
