"""Per-turn file snapshots, so ``/undo`` can put back what a turn changed.

Works with or without git, and whatever changed the files (a patch, ``write_file``, a
shell command). At the start of a turn every workspace file (as git would see it:
``.git/`` and ignored paths left out) is recorded by size and mtime, and its content
is copied into a content-addressed store unless an identical copy is already there —
so after the first turn only files that changed cost anything. At the end of the turn
the walk is repeated; every file added, changed or removed is remembered with its
content from the start. ``undo`` restores the newest such turn.

``undo`` writes as a patch does (``codemode.tools.store.journal``): it first journals
every path it will touch with what the path holds now, so an undo killed partway (kill
-9, a lost terminal) is rolled back the next time codemode touches the workspace — the
files are as before the undo, never some restored and some not, and no temporary file
is left behind.

A file that appears during a turn but is older than the turn (it was ignored when the
turn began) is not taken for one the turn created. Files over ``max_file_bytes``, files
beyond ``max_total_bytes`` of content, and files past ``max_hashed_bytes`` read in one
scan (a command makes 50,000 hard links to one file of 4 MB in a second: reading each
took 200 GB of hashing, ~8 minutes) are not copied: a turn that changes one of them
says so, and ``undo`` leaves it alone. A workspace of more than ``max_files``
files turns snapshots off (``disabled`` says why), and so does one the walk could not
read whole (a folder of more entries than it reads, ``codemode.tools.walk_bounds``, or
paths longer than the system takes): ``undo`` could not put back what it did not see.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from codemode.hostfs.beneath import Missing, Tree, rmdir, unlink, write_atomic
from codemode.tools.context import ToolError
from codemode.tools.fs.reading import NotRegular, TooBig, read_resolved, read_spot
from codemode.tools.ignore import walk_files
from codemode.tools.store import MAX_READ_BYTES, journal

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
# Beyond this many files a walk per turn costs seconds: snapshots are turned off.
MAX_FILES = 50_000
# The most bytes one scan reads to hash (~1 s here): twice what the store keeps, so
# files of the same content, which are stored once, are still hashed.
MAX_HASHED_BYTES = 2 * MAX_TOTAL_BYTES
# File times come from a coarser clock than time.time_ns(): allow for the difference.
_CLOCK_SLACK_NS = 50_000_000


@dataclass(frozen=True)
class _Entry:
    size: int
    mtime_ns: int
    blob: str | None  # content hash in the store; None when too big to keep
    # Modified so close to the scan that a later change in the same clock tick would
    # keep size and mtime (git's "racy" entries): such an entry is hashed again.
    racy: bool = False


@dataclass
class TurnChanges:
    """What one turn did to the workspace: path -> its blob before the turn
    (None: the file did not exist)."""

    before: dict[str, str | None] = field(default_factory=dict)
    unrestorable: list[str] = field(default_factory=list)

    def paths(self) -> list[str]:
        return sorted([*self.before, *self.unrestorable])


@dataclass
class UndoResult:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # Too big to have been snapshotted: left as they are.
    skipped: list[str] = field(default_factory=list)
    # "path: why" for files that could not be put back (a folder on the way is now a
    # symlink, say): left as they are.
    failed: list[str] = field(default_factory=list)


class Snapshots:
    """Snapshots of one workspace for one interactive session."""

    def __init__(
        self,
        root: Path,
        *,
        store: Path | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        max_files: int = MAX_FILES,
        max_hashed_bytes: int = MAX_HASHED_BYTES,
    ) -> None:
        self.root = root.resolve()
        self._own_store = store is None
        self.store = store or Path(tempfile.mkdtemp(prefix="codemode-undo-"))
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.max_files = max_files
        self.max_hashed_bytes = max_hashed_bytes
        self._hashed = 0  # bytes read to hash in the scan under way
        # Why snapshots are off (too many files), or None while they work.
        self.disabled: str | None = None
        self._stored_bytes = 0
        self._blobs: set[str] = set()
        self._start: dict[str, _Entry] | None = None
        self._started_ns = 0
        self._last: dict[str, _Entry] = {}  # the latest scan: unchanged files are not read again
        self.turns: list[TurnChanges] = []

    # --- recording -------------------------------------------------------------------

    def prepare(self) -> None:
        """Read and store the workspace ahead of the first turn (the costly part of
        the first ``begin_turn``; the interactive session runs it while the user types)."""
        if self.disabled is None:
            self._last = self._scan(self._last, store=True) or {}

    def begin_turn(self) -> None:
        """Record the workspace as it is before a turn."""
        self._started_ns = time.time_ns()
        self._start = self._scan(self._last, store=True) if self.disabled is None else None

    def end_turn(self) -> TurnChanges | None:
        """Compare with the start of the turn; remember and return the changes (None
        when the turn changed nothing)."""
        if self._start is None:
            return None
        start = self._start
        now = self._scan(start, store=False)
        if now is None:
            self._start = None
            return None
        changes = TurnChanges()
        for rel in sorted(set(start) | set(now)):
            old, new = start.get(rel), now.get(rel)
            if old is not None and new is not None and old.blob == new.blob and old.blob:
                continue
            if old is not None and new is not None and old.blob is None and new.blob is None:
                if (old.size, old.mtime_ns) == (new.size, new.mtime_ns):
                    continue  # too big to hash: size and mtime are all there is
            if old is None:
                if new is not None and new.mtime_ns < self._started_ns - _CLOCK_SLACK_NS:
                    # Older than the turn: a file that was ignored when it began (its
                    # .gitignore line went away), not one the turn created.
                    continue
                changes.before[rel] = None
            elif old.blob is None:
                changes.unrestorable.append(rel)
            else:
                changes.before[rel] = old.blob
        self._start = None
        self._last = now
        if not changes.before and not changes.unrestorable:
            return None
        self.turns.append(changes)
        return changes

    def _scan(self, known: dict[str, _Entry], *, store: bool) -> dict[str, _Entry] | None:
        """The workspace's files now; None (and snapshots off) when there are too many."""
        entries: dict[str, _Entry] = {}
        racy_after = time.time_ns() - _CLOCK_SLACK_NS
        self._hashed = 0
        root = str(self.root)  # joined as text: a Path per file was half of a rescan
        walk = walk_files(self.root)
        for rel in walk:
            if len(entries) >= self.max_files:
                walk.close()
                self._turn_off(f"the workspace has more than {self.max_files} files")
                return None
            if walk.cuts.first is not None:
                break
            path = os.path.join(root, rel)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):  # (lstat: a symbolic link is not one)
                continue
            old = known.get(rel)
            same = old is not None and (old.size, old.mtime_ns) == (st.st_size, st.st_mtime_ns)
            stored = old is not None and (old.blob is None or old.blob in self._blobs or not store)
            if old is not None and same and not old.racy and stored:
                entries[rel] = old
                continue
            blob = self._hash_and_store(Path(path), st.st_size, store=store)
            racy = st.st_mtime_ns >= racy_after
            entries[rel] = _Entry(st.st_size, st.st_mtime_ns, blob, racy)
        cut = walk.cuts.note(".", "scanned")
        if cut is not None:
            walk.close()
            self._turn_off(cut)
            return None
        return entries

    def _turn_off(self, why: str) -> None:
        self.disabled = why
        self._last, self._start = {}, None

    def _hash_and_store(self, path: Path, size: int, *, store: bool) -> str | None:
        if size > self.max_file_bytes or self._hashed + size > self.max_hashed_bytes:
            return None
        try:
            # Regular files only, and no more than the cap even if it grew meanwhile;
            # the kernel resolves the path (``read_resolved``): a walk from ``/`` in
            # Python per file made a tree a command made 1500 folders deep, a file in
            # each, cost 40 times a flat one.
            data = read_resolved(path, self.max_file_bytes)
        except (OSError, ToolError):
            return None
        self._hashed += len(data)
        digest = hashlib.sha256(data).hexdigest()
        if store and digest not in self._blobs:
            if self._stored_bytes + len(data) > self.max_total_bytes:
                return None
            (self.store / digest).write_bytes(data)
            self._blobs.add(digest)
            self._stored_bytes += len(data)
        return digest if digest in self._blobs or not store else None

    # --- undoing ---------------------------------------------------------------------

    def undo(self) -> UndoResult | None:
        """Put back the files the newest recorded turn changed; None if there is none.

        Each path is walked from the workspace's descriptor without following any
        symlink (``codemode.tools.fs``): a folder the turn swapped for a link to
        somewhere else makes that file fail, and nothing is written outside the
        workspace. A file swapped for a symlink is replaced by the file again.
        """
        if not self.turns:
            return None
        # What a killed patch, write or undo left here is rolled back first.
        journal.recover(self.root)
        changes = self.turns.pop()
        result = UndoResult(skipped=list(changes.unrestorable))
        # No guard: undo puts back what the workspace held before the turn, .codemode/
        # included; it never follows a link, so it writes only the recorded paths.
        tree = Tree([self.root], follow=False)
        tag = journal.new_tag()
        entries = _journal_entries(tree, self.root, changes, tag)
        recording = journal.begin(self.root, [self.root], entries, tag, follow=False)
        try:
            self._restore(tree, changes, tag, result)
        finally:
            recording.close()
        return result

    def _restore(self, tree: Tree, changes: TurnChanges, tag: str, result: UndoResult) -> None:
        for rel, blob in sorted(changes.before.items()):
            path = self.root / rel
            try:
                if blob is None:
                    with tree.locate(path, follow_last=False, shown=rel) as spot:
                        st = spot.lstat()
                        if st is None or stat.S_ISDIR(st.st_mode):
                            continue
                        unlink(spot)
                    result.removed.append(rel)
                    _remove_empty_parents(tree, path.parent, self.root)
                    continue
                data = (self.store / blob).read_bytes()
                with tree.locate(path, follow_last=False, make_parents=True, shown=rel) as spot:
                    write_atomic(spot, data, tag=tag)  # the journal's temporary name
                result.restored.append(rel)
            except (OSError, ToolError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                result.failed.append(f"{rel}: {why}")

    def close(self) -> None:
        if self._own_store:
            shutil.rmtree(self.store, ignore_errors=True)


def _journal_entries(tree: Tree, root: Path, changes: TurnChanges, tag: str) -> list[journal.Entry]:
    """The journal of an undo (``journal``): each path it will write or remove with what
    it holds now (the undo's "before") and the digest of what it will hold after."""
    entries: list[journal.Entry] = []
    for rel, blob in sorted(changes.before.items()):
        path = root / rel
        entry = journal.Entry(
            path,
            tmp=None if blob is None else journal.tmp_for(path, tag),
            after=blob,  # a blob is named by its SHA-256; None: the file is removed
            made_dirs=[] if blob is None else journal.missing_dirs(path, [root]),
            # A removal empties and removes its folders (``_remove_empty_parents``).
            parent_dirs=[] if blob is not None else _parents_below(path, root),
        )
        try:
            with tree.locate(path, follow_last=False) as spot:
                st = spot.lstat()
                if st is None:
                    pass  # no file now: before is "nothing"
                elif stat.S_ISDIR(st.st_mode):
                    continue  # undo leaves a folder alone (or fails on it)
                elif stat.S_ISLNK(st.st_mode):
                    entry.before_link = os.readlink(spot.name, dir_fd=spot.parent)
                else:
                    entry.before = read_spot(spot, MAX_READ_BYTES, rel)
                    entry.before_mode = stat.S_IMODE(st.st_mode)
        except Missing:
            pass  # a folder on the way is gone: nothing there now
        except (NotRegular, TooBig):
            # A device, or more than a file tool reads: the journal cannot hold what
            # it was, so a killed undo leaves this one path as it got (its temporary
            # file is still removed); the rest are rolled back.
            entry.unknown = True
        except (OSError, ToolError):
            continue  # the undo fails on this path too (a folder swapped for a link)
        entries.append(entry)
    return entries


def _parents_below(path: Path, root: Path) -> list[Path]:
    """The folders between ``root`` and ``path``, shallowest first."""
    return list(reversed([p for p in path.parents if p != root and p.is_relative_to(root)]))


def _remove_empty_parents(tree: Tree, directory: Path, root: Path) -> None:
    while directory != root and directory.is_relative_to(root):
        try:
            with tree.locate(directory, follow_last=False) as spot:
                rmdir(spot)
        except (OSError, ToolError):
            return
        directory = directory.parent
