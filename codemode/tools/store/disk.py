"""``DiskStore``: the real files, through the race-free walk of ``codemode.tools.fs``.

Reads may look anywhere (the model often needs a system header or a sibling project),
regular files only, up to a byte cap, never the agent's own ``/proc`` entries. Writes
are checked twice: by name first (``ToolContext.resolve_writable``, which says why a path
is refused), then for real, component by component from the writable roots'
descriptors (``codemode.tools.fs.writing``), so a directory swapped for a symlink
meanwhile cannot send a write elsewhere and no protected path is ever written.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.hostfs.beneath import Tree, unlink, write_atomic
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs.reading import read_regular
from codemode.tools.fs.writing import (
    WriteScope,
    existing_bytes,
    locate_existing,
    writable_tree,
    write_new_or_replace,
)
from codemode.tools.store import (
    MAX_READ_BYTES,
    DirItem,
    FileInfo,
    FileKind,
    OutsideRoots,
    WriteRefused,
    journal,
)

if TYPE_CHECKING:
    from codemode.tools.store.commit import Original, Removal, Write


def _kind(mode: int) -> FileKind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def _item(entry: os.DirEntry[str]) -> DirItem:
    if entry.is_symlink():
        return DirItem(entry.name, "symlink", None)
    if entry.is_dir(follow_symlinks=False):
        return DirItem(entry.name, "dir", None)
    if entry.is_file(follow_symlinks=False):
        return DirItem(entry.name, "file", entry.stat(follow_symlinks=False).st_size)
    return DirItem(entry.name, "other", None)


def outside_roots(ctx: WriteScope, path: Path) -> bool:
    """Whether the only thing refusing a write of ``path`` is that it lies outside the
    writable roots (not a protected name, not a read-only sandbox)."""
    from codemode.sandbox.protection.paths import write_refusal

    return write_refusal(path, ctx.sandbox.writable_roots()) == "outside the writable roots"


class DiskStore:
    """The files on disk, as the session's writable roots and protected paths allow."""

    def __init__(self, ctx: WriteScope) -> None:
        self.ctx = ctx

    def read(self, path: Path, shown: str) -> bytes:
        return read_regular(path, MAX_READ_BYTES, shown)

    def stat(self, path: Path) -> FileInfo | None:
        try:
            with Tree(None).locate(path, shown=path) as spot:
                real, st = spot.real, spot.lstat()
        except IsADirectoryError:  # "/" itself, which has no last component to walk to
            real, st = path, os.stat(path)
        except (OSError, ToolError):  # nothing there, or it kept changing
            return None
        if st is None:
            return None
        return FileInfo(_kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, real)

    def overlaid(self) -> Mapping[Path, bytes | None]:
        return {}

    def entries(self, path: Path, limit: int | None = None) -> list[DirItem]:
        # Read as they come (the kernel hands them over a block at a time) and no
        # further than ``limit``: each one read costs memory, and a file's a stat.
        with os.scandir(path) as found:
            return [_item(entry) for entry in itertools.islice(found, limit)]

    def writable(self, path: Path, shown: str, *, grant: Path | None = None) -> None:
        # The refusal names the path as the caller did when ``shown`` is that path.
        named = shown if self.ctx.resolve(shown) == path else path
        try:
            self.ctx.resolve_writable(named)
        except ToolError as refusal:
            if not outside_roots(self.ctx, path):
                raise WriteRefused(str(refusal)) from None
            if grant is not None and _under(path, grant):
                return
            raise OutsideRoots(str(refusal)) from None

    def _tree(self, grant: Path | None) -> Tree:
        tree = writable_tree(self.ctx)
        if grant is None or tree.roots is None:
            return tree
        return Tree([*tree.roots, grant], follow=tree.follow, refuse=tree.refuse)

    def write(self, path: Path, data: bytes, shown: str, *, grant: Path | None = None) -> bool:
        self.writable(path, shown, grant=grant)
        # Walked from the roots' descriptors, never by name again.
        tree = self._tree(grant)
        with self._journaled_write(tree, path) as tag:
            return write_new_or_replace(tree, path, data, shown, tag=tag)

    def replace(
        self,
        path: Path,
        shown: str,
        change: Callable[[bytes | None], bytes],
        *,
        grant: Path | None = None,
    ) -> tuple[bytes, bool]:
        self.writable(path, shown, grant=grant)
        # One walk from the roots' descriptors: what is read is what is replaced.
        tree = self._tree(grant)
        with self._journaled_write(tree, path) as tag:
            spot = locate_existing(tree, path, shown)
            if spot is None:
                data = change(None)
                return data, write_new_or_replace(tree, path, data, shown, tag=tag)
            with spot:
                data = change(existing_bytes(spot, MAX_READ_BYTES, shown))
                return data, write_atomic(spot, data, tag=tag)

    def remove(self, path: Path, shown: str) -> None:
        self.writable(path, shown)
        self.recover()
        with writable_tree(self.ctx).locate(path, follow_last=False, shown=shown) as spot:
            unlink(spot)

    def commit(
        self,
        removals: Sequence[Removal],
        writes: Sequence[Write],
        originals: Mapping[Path, Original],
    ) -> None:
        from codemode.tools.store.commit import CommitFailed, commit, journal_entries

        tree = writable_tree(self.ctx)
        self.recover()
        tag = journal.new_tag()
        roots = _real_roots(tree)
        entries = journal_entries(removals, writes, originals, roots, tag)
        recording = journal.begin(self.ctx.workspace, roots, entries, tag)
        keep = False
        try:
            commit(removals, writes, originals, tree, tag, recording.entries)
        except CommitFailed as failed:
            # Some change could not be undone here: the next touch tries again.
            keep = failed.partial
            raise
        finally:
            recording.close(keep=keep)

    def recover(self) -> list[str]:
        """Roll back what a killed patch or write left in this workspace (``journal``);
        the lines say what was done. Costs one ``listdir`` when there is nothing."""
        return journal.recover(self.ctx.workspace)

    @contextlib.contextmanager
    def _journaled_write(self, tree: Tree, path: Path) -> Iterator[str]:
        """A single write's journal: its temporary file and the folders it makes, so a
        kill leaves neither behind (the rename itself is atomic)."""
        self.recover()
        tag = journal.new_tag()
        roots = _real_roots(tree)
        real = Path(os.path.realpath(path))
        if not any(real.is_relative_to(r) and real != r for r in roots):
            yield tag  # refused by the walk anyway
            return
        entry = journal.Entry(
            real,
            tmp=journal.tmp_for(real, tag),
            unknown=True,
            made_dirs=journal.missing_dirs(real, roots),
        )
        recording = journal.begin(self.ctx.workspace, roots, [entry], tag)
        try:
            yield tag
        finally:
            recording.close()


def _real_roots(tree: Tree) -> list[Path]:
    roots = tree.roots if tree.roots is not None else [Path("/")]
    return [Path(os.path.realpath(r)) for r in roots]


def _under(path: Path, grant: Path) -> bool:
    """Whether ``path`` is the file an approval was given for: one directly in the
    approved directory, as named (the walk then keeps it there, symlinks included)."""
    return Path(os.path.normpath(path)).parent == Path(os.path.normpath(grant))
