"""Applying a batch journal to a repository: all or nothing, a kill -9 included.

Before the first change on disk, the repository's before-state of every path the
journal touches (bytes and mode, a link's target, or nothing; the folders it will make)
goes into a write-ahead journal (``codemode.tools.store.journal``, the one patches and
/undo use), held locked while the changes are made. A failure partway (a full disk, a
permission, a folder that is in the way) rolls back from that journal at once; a driver
killed partway leaves it for the next ``recover`` of the repository — the next apply
to it, or any entry point that starts there — which puts every path back. Either way
the repository ends whole before or whole after, with no temporary file left.

Every write goes through the host's one writer (``codemode.hostfs.writer``): no
symlink in the repository is followed, and the temporary names are the journal's
random ones, created exclusively. No journal can be kept (codemode's home not
writable): nothing is applied.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from codemode.batch.changes import JOURNAL_BYTES, ApplyError, Change, check
from codemode.hostfs.beneath import mkdir, symlink_atomic, write_atomic
from codemode.hostfs.fingerprint import of_bytes
from codemode.hostfs.writer import Refused, Writer, default_mode
from codemode.tool_terms.errors import ToolError
from codemode.tools.store import journal
from codemode.tools.store.journal_format import Entry


def apply(root: Path, changes: list[Change]) -> None:
    """Apply ``changes`` to the repository at ``root``, all or nothing; ApplyError
    (the repository as it was) otherwise."""
    root = root.resolve()
    check(root, changes)
    # An apply (or a patch) killed earlier in this repository is rolled back first, so
    # the bases below are compared with the repository's real state.
    journal.recover(root)
    writer = Writer(root)
    tag = journal.new_tag()
    entries = _entries(writer, root, changes, tag)
    recording = journal.begin(root, [root], entries, tag, follow=False)  # its writer: no link
    if recording.path is None:
        raise ApplyError("no write journal could be kept in codemode's home: nothing applied")
    try:
        for change in changes:
            _apply_one(change, writer, tag)
    except BaseException as exc:
        recording.close(keep=True)  # unlocked: recover() takes it and puts everything back
        problems = [line for line in journal.recover(root) if "Not restored" in line]
        if isinstance(exc, Refused):
            message = f"{exc} (no symlink in the repository is followed)"
        elif isinstance(exc, OSError | ToolError):
            message = f"cannot apply the changes: {exc}"
        else:
            raise
        raise ApplyError("\n".join([message, *problems])) from None
    recording.close()


def _entries(writer: Writer, root: Path, changes: list[Change], tag: str) -> list[Entry]:
    """The journal's entries; ApplyError when a path no longer holds the journal's base.
    Empty folders removed first, then files, links and removals, then the folders to
    make, deepest first (the recovery removes each entry's made folders in order, a
    parent only once empty)."""
    removed: list[Entry] = []
    entries: list[Entry] = []
    folders: list[Entry] = []
    # What the journal keeps of the files it replaces or removes, to put them back, is
    # held too: bounded as their new bytes are (a script that empties or deletes a
    # 50 GB file would have the host read all of it).
    budget = [JOURNAL_BYTES]
    for change in changes:
        path = root / change.path
        if change.kind == "mkdir":
            made = journal.missing_dirs(path / "_", [root])
            now = writer.lstat(change.path)
            if now is not None and not stat.S_ISDIR(now.st_mode):
                made.append(path)  # a link or file the changes remove first: made here
            folders.append(Entry(path, unknown=True, made_dirs=made))
        elif change.kind == "rmdir":
            now = writer.lstat(change.path)
            if now is not None and stat.S_ISDIR(now.st_mode):
                mode = stat.S_IMODE(now.st_mode)
                removed.append(Entry(path, before_mode=mode, unknown=True, removed_dir=True))
        else:
            entries.append(_file_entry(writer, root, change, tag, budget))
    # Undone in reverse: the folders made are removed first, the files put back, and
    # the empty folders removed made again last (a file may have taken one's name).
    return [*removed, *entries, *reversed(folders)]


def _file_entry(
    writer: Writer, root: Path, change: Change, tag: str, budget: list[int]
) -> Entry:
    rel, path = change.path, root / change.path
    try:
        st, before, link = writer.look(rel, most=budget[0])
    except Refused:
        # A link on the way: nothing is there as far as the journal goes.
        st, before, link = None, None, None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ApplyError(
                f"the changes replace or remove more than {JOURNAL_BYTES >> 20} MiB of "
                f"files ({rel} among them): too much to keep for putting back; nothing "
                "was applied") from None
        raise ApplyError(f"cannot read {rel} in the repository: {exc}") from None
    budget[0] -= len(before or b"")
    mode = stat.S_IMODE(st.st_mode) if before is not None and st else default_mode()
    if _fingerprint(st, before, link) != change.base:
        raise ApplyError(f"{rel} changed in the repository while the batch ran")
    if change.kind == "deleted":
        # The journal may remove the folders it empties: they come back with the file.
        above = [root.joinpath(*path.relative_to(root).parts[:i])
                 for i in range(1, len(path.relative_to(root).parts))]  # fmt: skip
        return Entry(path, before=before, before_mode=mode, before_link=link, parent_dirs=above)
    after = (
        journal.link_after(os.fsdecode(change.data))
        if change.kind == "symlink"
        else hashlib.sha256(change.data).hexdigest()
    )
    return Entry(
        path, tmp=journal.tmp_for(path, tag), before=before, before_mode=mode,
        before_link=link, after=after, made_dirs=journal.missing_dirs(path, [root]),
    )  # fmt: skip


def _fingerprint(st: os.stat_result | None, data: bytes | None, link: str | None) -> str | None:
    """What ``changes.fingerprint`` says of the same state."""
    if st is None or stat.S_ISDIR(st.st_mode):
        return None
    if link is not None:
        return of_bytes(os.fsencode(link), symlink=True)
    if data is not None:
        return of_bytes(data)
    return "other"


def _apply_one(change: Change, writer: Writer, tag: str) -> None:
    rel = change.path
    if change.kind == "rmdir":
        st = writer.lstat(rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            try:
                writer.rmdir(rel)
            except OSError:
                pass  # not empty: it holds files the script never saw (ignored ones)
        return
    if change.kind == "mkdir":
        with writer.spot(rel, make_parents=True) as spot:
            st = spot.lstat()
            if st is None:
                mkdir(spot)
            elif not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"{rel}: a folder is to be made where a file is")
        return
    if change.kind == "deleted":
        writer.remove(rel)
        return
    with writer.spot(rel, make_parents=True) as spot:
        if change.kind == "symlink":
            symlink_atomic(spot, os.fsdecode(change.data), tag)
            return
        old = spot.lstat()
        # Permission bits only: a setuid/setgid bit kept on new bytes would make the
        # program's content a set-id binary of the user running the batch (the kernel
        # drops both bits when anyone writes to such a file).
        mode = stat.S_IMODE(old.st_mode) & 0o777 if old and stat.S_ISREG(old.st_mode) else (
            default_mode()
        )
        executable = (mode & 0o444) >> 2  # x wherever r is, as git checks files out
        bits = (mode | executable) if change.executable else (mode & ~0o111)
        write_atomic(spot, change.data, bits, tag=tag)
