"""A write-ahead journal, so that a patch or a file write killed partway (kill -9, a
crash, a lost terminal) is rolled back the next time codemode touches the workspace.

Before the first change on disk, ``recording`` writes one journal file naming every
path the commit will touch: what it held before (its bytes and mode, a symlink's
target, or nothing), the SHA-256 of what it will hold after, the temporary file the
write goes through and the folders the write will create. The journal is removed once
the commit has finished (or rolled itself back). A journal left behind means a process
died in between: ``recover`` (run by ``DiskStore`` before it touches the workspace)
puts back every path that holds its "after" state, leaves one that holds its "before"
state, removes the temporary files and the folders made (and makes again the folders
a removal emptied and removed: ``/undo``'s), and reports a path that holds neither
(something else wrote it since) instead of overwriting it.

A single-file write (write_file, edit) is already atomic (a rename); its journal names
only the temporary file and the folders made, so nothing is left behind.

Journals live in ``$CODEMODE_HOME/journal`` (mode 0700), one file per commit, named for
the workspace: a confined command cannot write there (codemode's home is never a
writable root, ``codemode.sandbox.protection.protected``). A journal is still validated strictly
before it is used: our own uid, a regular file, then the format's own checks
(``journal_format``: a SHA-256 of the content, absolute normalised paths under the roots
it names), and every path is walked from the folder the journal recorded for it, its
identity checked, with no link followed and the protected-path check of every other
write (``journal_walk``): a link a program put on the way since is reported, never
acted through. The writer holds
an ``flock`` on its journal for the commit's lifetime, so ``recover`` never touches a
commit still in progress in another process; a journal gets its name only once it is
whole and locked (``_new_file``). Nothing is fsynced: the guarantee is
against a process killed, not against power loss.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from codemode.hostfs.beneath import (
    rmdir,
    tmp_name,
)
from codemode.locations.config_file import codemode_home
from codemode.tool_terms.errors import ToolError
from codemode.tools.store import journal_walk
from codemode.tools.store.journal_format import BadJournal, Entry, decode, encode
from codemode.tools.store.journal_undo import Undo, link_after, shown
from codemode.tools.store.journal_walk import missing_dirs  # (re-exported)

JOURNAL_SUFFIX = ".journal"
MAX_JOURNAL_BYTES = 4 * 1024 * 1024 * 1024
log = logging.getLogger(__name__)


def journal_dir() -> Path:
    return codemode_home() / "journal"


def workspace_key(workspace: Path) -> str:
    real = os.path.realpath(workspace)
    return hashlib.sha256(os.fsencode(real)).hexdigest()[:16]


# --- writing --------------------------------------------------------------------------


class Recording:
    """A journal on disk, locked, until ``close`` removes it (or ``keep`` leaves it
    for the next ``recover``)."""

    def __init__(self, path: Path | None, fd: int, entries: Sequence[Entry] = ()) -> None:
        self.path, self.fd = path, fd
        self.entries = list(entries)  # as recorded (``anchored``): the commit checks them

    def close(self, *, keep: bool = False) -> None:
        if self.path is not None and not keep:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


def open_dir() -> Path:
    folder = journal_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def begin(workspace: Path, roots: Sequence[Path], entries: Sequence[Entry], tag: str, *,
          follow: bool = True) -> Recording:  # fmt: skip
    """Write and lock the journal of a commit about to start; a Recording whose path is
    None when no journal could be written (codemode's home not writable): the commit
    then goes ahead as before, unprotected against a kill, and says so in the log.
    ``follow``: whether the commit follows links within the roots (the file tools) or
    none (a batch, /undo); each path is recorded where such a walk reaches it."""
    # Where each path really is, and the folder it is reached from (a recovery acts
    # only if a walk that follows no link still reaches that folder).
    anchored = journal_walk.anchored(roots, entries, follow=follow)
    tmp: Path | None = None
    try:
        folder = open_dir()
        name = f"{workspace_key(workspace)}-{tag}"
        final = folder / f"{name}{JOURNAL_SUFFIX}"
        fd, tmp = _new_file(folder, name)
    except OSError as exc:
        log.info("no patch journal (%s): an interrupted write cannot be rolled back", exc)
        return Recording(None, -1, anchored)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "wb") as out:
            out.writelines(encode(workspace, roots, anchored))
        if tmp is None:  # named only now, whole and locked
            _name_it(fd, final)
        else:
            os.rename(tmp, final)
    except OSError as exc:
        os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        log.info("no patch journal (%s): an interrupted write cannot be rolled back", exc)
        return Recording(None, -1, anchored)
    return Recording(final, fd, anchored)


def _new_file(folder: Path, name: str) -> tuple[int, Path | None]:
    """A new journal file in ``folder``, not yet locked, and its temporary name: none
    where the kernel makes it without one (``O_TMPFILE``). A named one can be seen, by
    another process's ``recover``, between its creation and its lock; taken for one a
    killed writer left, it was removed under its writer (about 1 write in 100 with a
    recovery running beside, ``tests/test_journal_publish_race.py``)."""
    if os.path.isdir("/proc/self/fd"):  # (the name is given through it)
        try:
            return os.open(folder, os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, 0o600), None
        except OSError:
            pass  # a file system without it: a named temporary file
    tmp = folder / f"{name}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(tmp, flags, 0o600), tmp


def _name_it(fd: int, path: Path) -> None:
    """Give the unnamed file ``fd`` the name ``path`` (linkat, following the
    ``/proc/self/fd`` link to the file: Python calls plain link(), which links the link
    itself, unless a folder descriptor is given)."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=folder, follow_symlinks=True)
    finally:
        os.close(folder)


def new_tag() -> str:
    return secrets.token_hex(6)


# --- reading and recovering -----------------------------------------------------------


def own_file(fd: int) -> bool:
    st = os.fstat(fd)
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_size < MAX_JOURNAL_BYTES


def _journals(workspace: Path) -> Iterator[Path]:
    folder = journal_dir()
    prefix = f"{workspace_key(workspace)}-"
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and (name.endswith(JOURNAL_SUFFIX) or name.endswith(".tmp")):
            yield folder / name


def recover(workspace: Path) -> list[str]:
    """Roll back every commit in ``workspace`` whose process died partway; returns one
    line per journal acted on (empty, and costing one ``listdir``, when there is none)."""
    reports: list[str] = []
    for path in _journals(workspace):
        try:
            # O_NONBLOCK: a FIFO in its place must not hang every start (then refused).
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its commit (or another process's recovery) is still running
            with contextlib.suppress(OSError):
                # Finished and removed meanwhile, or replaced: not ours to act on.
                if os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                    continue
            if not path.exists():
                continue
            if path.name.endswith(".tmp"):
                os.unlink(path)  # died while writing it: nothing was changed yet
                continue
            report = _recover_one(path, fd, workspace)
            if report:
                reports.append(report)
        finally:
            os.close(fd)
    return reports


def _load(fd: int) -> bytes:
    """The journal's bytes, never more than a journal may hold (a file that grows while
    read, or one swapped for something else, is refused)."""
    if not own_file(fd):
        raise BadJournal("not a regular file of this user")
    chunks, size = [], 0
    while chunk := os.read(fd, 1 << 20):
        size += len(chunk)
        if size >= MAX_JOURNAL_BYTES:
            raise BadJournal("larger than any journal")
        chunks.append(chunk)
    return b"".join(chunks)


def _recover_one(path: Path, fd: int, workspace: Path) -> str | None:
    try:
        loaded = decode(_load(fd), workspace)
    except (BadJournal, ValueError, KeyError, TypeError, OSError) as exc:
        aside = path.with_name(path.name + ".bad")
        with contextlib.suppress(OSError):
            os.rename(path, aside)
        log.info("ignored the journal %s: %s", path, exc)
        return (
            f"codemode: ignored a damaged write journal ({shown(str(exc))}); it was moved "
            f"to {shown(aside)}."
        )
    undo = Undo(loaded.roots, loaded.entries, _tag_of(path, workspace))
    restored = 0
    conflicts: list[str] = []
    # A path where the commit made a folder (a link replaced by a real folder) is put
    # back once that folder is removed: after the others, not as a conflict.
    made = {folder for entry in loaded.entries for folder in entry.made_dirs}
    later: list[Entry] = []
    for entry in reversed(loaded.entries):
        outcome = undo.run(entry)
        if outcome == "restored":
            restored += 1
        elif outcome == "conflict" and entry.path in made:
            later.append(entry)
        elif outcome not in _FINE:
            conflicts.append(_why(entry, outcome))
    for entry in loaded.entries:
        for folder in reversed(entry.made_dirs):
            with contextlib.suppress(OSError, ToolError), undo.reach(entry, folder) as spot:
                rmdir(spot)
    for entry in later:
        outcome = undo.run(entry)
        if outcome == "restored":
            restored += 1
        elif outcome not in _FINE:
            conflicts.append(_why(entry, outcome))
    if conflicts:
        # The originals of what was not put back stay readable (no file is lost).
        kept = path.with_name(path.name + ".kept")
        os.rename(path, kept)
    else:
        os.unlink(path)
    if restored == 0 and not conflicts:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(loaded.started))
    line = (
        f"codemode: rolled back an interrupted write (process {loaded.pid}, {when}): "
        f"{restored} file(s) restored."
    )
    if conflicts:
        line += " Not restored:\n  " + "\n  ".join(conflicts)
        line += f"\n  (their contents before the write are kept in {shown(kept)})"
    log.info("%s", line)
    return line


_FINE = ("unchanged", "absent", "done")


def _why(entry: Entry, outcome: str) -> str:
    if outcome == "conflict":
        return f"{shown(entry.path)}: changed since; left as it is"
    return outcome


def _tag_of(path: Path, workspace: Path) -> str:
    """The journal's tag (in its name): a restore goes through the same temporary name
    as the commit's, so a recovery killed partway leaves nothing the next one misses."""
    tag = path.name.removeprefix(f"{workspace_key(workspace)}-").removesuffix(JOURNAL_SUFFIX)
    return tag if tag and all(c in "0123456789abcdef" for c in tag) else new_tag()


def tmp_for(path: Path, tag: str) -> str:
    return tmp_name(path.name, tag)


__all__ = [
    "JOURNAL_SUFFIX",
    "MAX_JOURNAL_BYTES",
    "BadJournal",
    "Entry",
    "Recording",
    "begin",
    "journal_dir",
    "link_after",
    "missing_dirs",
    "new_tag",
    "own_file",
    "recover",
    "tmp_for",
    "workspace_key",
]
