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
it names), and the same race-free walk and protected-path check as every other write
(``codemode.tools.fs``). The writer holds
an ``flock`` on its journal for the commit's lifetime, so ``recover`` never touches a
commit still in progress in another process. Nothing is fsynced: the guarantee is
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
    Missing,
    Spot,
    Tree,
    mkdir,
    rmdir,
    symlink,
    tmp_name,
    unlink,
    write_atomic,
)
from codemode.locations.config_file import codemode_home
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard
from codemode.tools.fs.reading import NotRegular, TooBig, read_spot
from codemode.tools.store import MAX_READ_BYTES
from codemode.tools.store.journal_format import BadJournal, Entry, decode, encode

JOURNAL_SUFFIX = ".journal"
MAX_JOURNAL_BYTES = 4 * 1024 * 1024 * 1024
log = logging.getLogger(__name__)


def journal_dir() -> Path:
    return codemode_home() / "journal"


def workspace_key(workspace: Path) -> str:
    real = os.path.realpath(workspace)
    return hashlib.sha256(os.fsencode(real)).hexdigest()[:16]


def missing_dirs(path: Path, roots: Sequence[Path]) -> list[Path]:
    """The folders above ``path`` (below its root) that do not exist yet, deepest
    last: a write there will create them."""
    below = [r for r in roots if Path(os.path.normpath(path)).is_relative_to(r)]
    root = max(below, key=lambda r: len(r.parts)) if below else None
    made: list[Path] = []
    for parent in Path(os.path.normpath(path)).parents:
        if root is None or parent == root or not parent.is_relative_to(root):
            break
        if os.path.lexists(parent):
            break
        made.append(parent)
    return list(reversed(made))


# --- writing --------------------------------------------------------------------------


class Recording:
    """A journal on disk, locked, until ``close`` removes it (or ``keep`` leaves it
    for the next ``recover``)."""

    def __init__(self, path: Path | None, fd: int) -> None:
        self.path = path
        self.fd = fd

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


def begin(workspace: Path, roots: Sequence[Path], entries: Sequence[Entry], tag: str) -> Recording:
    """Write and lock the journal of a commit about to start; a Recording whose path is
    None when no journal could be written (codemode's home not writable): the commit
    then goes ahead as before, unprotected against a kill, and says so in the log."""
    try:
        folder = open_dir()
        name = f"{workspace_key(workspace)}-{tag}"
        tmp = folder / f"{name}.tmp"
        final = folder / f"{name}{JOURNAL_SUFFIX}"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        log.info("no patch journal (%s): an interrupted write cannot be rolled back", exc)
        return Recording(None, -1)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "wb") as out:
            out.writelines(encode(workspace, roots, entries))
        os.rename(tmp, final)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        log.info("no patch journal (%s): an interrupted write cannot be rolled back", exc)
        return Recording(None, -1)
    return Recording(final, fd)


def link_after(target: str) -> str:
    """An entry's ``after`` for a write that leaves a symlink to ``target`` (a batch
    journal's link): a SHA-256 that no file's content is taken for."""
    return hashlib.sha256(b"\0symlink\0" + os.fsencode(target)).hexdigest()


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
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its commit is still running
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


def _recover_one(path: Path, fd: int, workspace: Path) -> str | None:
    try:
        if not own_file(fd):
            raise BadJournal("not a regular file of this user")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        loaded = decode(b"".join(chunks), workspace)
    except (BadJournal, ValueError, KeyError, TypeError, OSError) as exc:
        aside = path.with_name(path.name + ".bad")
        with contextlib.suppress(OSError):
            os.rename(path, aside)
        log.info("ignored the journal %s: %s", path, exc)
        return f"codemode: ignored a damaged write journal ({exc}); it was moved to {aside}."
    tree = Tree(loaded.roots, refuse=guard.write_refusal)
    restored = 0
    conflicts: list[str] = []
    # A path where the commit made a folder (a link replaced by a real folder) is put
    # back once that folder is removed: after the others, not as a conflict.
    made = {folder for entry in loaded.entries for folder in entry.made_dirs}
    later: list[Entry] = []
    for entry in reversed(loaded.entries):
        try:
            outcome = _undo(tree, entry)
        except (OSError, ToolError) as exc:
            conflicts.append(f"{entry.path}: {exc}")
            continue
        if outcome == "restored":
            restored += 1
        elif outcome == "conflict" and entry.path in made:
            later.append(entry)
        elif outcome == "conflict":
            conflicts.append(f"{entry.path}: changed since; left as it is")
    for entry in loaded.entries:
        for folder in reversed(entry.made_dirs):
            with (
                contextlib.suppress(OSError, ToolError),
                tree.locate(folder, follow_last=False) as spot,
            ):
                rmdir(spot)
    for entry in later:
        try:
            outcome = _undo(tree, entry)
        except (OSError, ToolError) as exc:
            outcome = str(exc)
        if outcome == "restored":
            restored += 1
        elif outcome != "unchanged":
            conflicts.append(f"{entry.path}: changed since; left as it is")
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
        line += f"\n  (their contents before the write are kept in {kept})"
    log.info("%s", line)
    return line


def _undo(tree: Tree, entry: Entry) -> str:
    if entry.removed_dir:
        return _make_again(tree, entry)
    try:
        spot = tree.locate(entry.path, follow_last=False)
    except Missing:
        if not entry.parent_dirs or entry.after is not None or _was_nothing(entry):
            return "absent"  # its folder is gone: nothing of the commit is left there
        # A removal that went on to remove the folders it emptied: they come back with
        # the file (they were there when the journal was written).
        for folder in entry.parent_dirs:
            with tree.locate(folder, follow_last=False) as above:
                if above.lstat() is None:
                    mkdir(above)
        spot = tree.locate(entry.path, follow_last=False)
    with spot:
        if entry.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                unlink(spot, entry.tmp)
        if entry.unknown:
            return "done"
        state = _state(spot)
        if _matches_before(state, entry):
            return "unchanged"
        is_after = state == ("file", entry.after) or (state is None and entry.after is None)
        if not is_after and not (state is not None and state[0] == "link" and entry.after
                                 == link_after(state[1])):  # fmt: skip
            return "conflict"
        if entry.before_link is not None:
            if state is not None:
                unlink(spot)
            symlink(spot, entry.before_link)
        elif entry.before is None:
            unlink(spot)
        else:
            write_atomic(spot, entry.before, entry.before_mode)
        return "restored"


def _make_again(tree: Tree, entry: Entry) -> str:
    """An empty folder the commit removed: made again (with the folders above it the
    commit removed too) when nothing is there."""
    with tree.locate(entry.path, follow_last=False, make_parents=True) as spot:
        st = spot.lstat()
        if st is None:
            mkdir(spot, entry.before_mode, exact=True)
            return "restored"
        return "unchanged" if stat.S_ISDIR(st.st_mode) else "conflict"


def _was_nothing(entry: Entry) -> bool:
    return entry.before is None and entry.before_link is None


def _state(spot: Spot) -> tuple[str, str] | None:
    st = spot.lstat()
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(spot.name, dir_fd=spot.parent))
    try:
        data = read_spot(spot, MAX_READ_BYTES, spot.name)  # no patch writes more
    except (NotRegular, TooBig):
        return ("other", "")
    return ("file", hashlib.sha256(data).hexdigest())


def _matches_before(state: tuple[str, str] | None, entry: Entry) -> bool:
    if entry.before_link is not None:
        return state == ("link", entry.before_link)
    if entry.before is None:
        return state is None
    return state == ("file", hashlib.sha256(entry.before).hexdigest())


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
