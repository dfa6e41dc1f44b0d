"""Putting back one journal's entries (``journal.recover``): each path walked from where
the journal says its commit stood, no link followed (``journal_walk``), and put back in
one rename only when it holds what the commit left there; a path that holds something
else is reported, never overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from codemode.hostfs.beneath import (
    Missing,
    Spot,
    mkdir,
    symlink_atomic,
    tmp_name,
    unlink,
    write_atomic,
)
from codemode.terminal.control_chars import visible
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard
from codemode.tools.fs.reading import NotRegular, TooBig, read_spot
from codemode.tools.store import MAX_READ_BYTES, journal_walk
from codemode.tools.store.journal_format import Entry
from codemode.tools.store.journal_walk import Blocked, Moved, reach


def link_after(target: str) -> str:
    """An entry's ``after`` for a write that leaves a symlink to ``target`` (a batch
    journal's link): a SHA-256 that no file's content is taken for."""
    return hashlib.sha256(b"\0symlink\0" + os.fsencode(target)).hexdigest()


def shown(path: Path | str) -> str:
    """A path a program may have named, for a line on a terminal: on one line (a newline
    in a name cannot forge a line of the notice), control characters and bytes that
    are not UTF-8 written out."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return visible(text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t"))


class Undo:
    """Puts back the entries of one journal, each walked from where the journal says its
    commit stood, no link followed (``journal_walk``)."""

    def __init__(self, roots: Sequence[Path], entries: Sequence[Entry], tag: str) -> None:
        self.roots = journal_walk.real_roots(roots)
        self.tag = tag
        # The links this journal replaces or removes, by where they are and what they
        # point at: one still there was not replaced yet (nothing of ours lies below).
        self.links = {(e.path, e.before_link) for e in entries if e.before_link is not None}
        self.links |= {e.way_link for e in entries if e.way_link is not None}  # not followed

    def reach(self, entry: Entry, path: Path, *, make_parents: bool = False) -> Spot:
        return reach(self.roots, entry, path, refuse=guard.write_refusal,
                     make_parents=make_parents)  # fmt: skip

    def run(self, entry: Entry) -> str:
        """ "restored", "unchanged", "absent", "done", "conflict", or the line that says
        why the entry was left as it is."""
        try:
            return _make_again(self, entry) if entry.removed_dir else _undo(self, entry)
        except Blocked as exc:
            if (exc.link, exc.target) in self.links:
                return "absent"  # the commit's own link, not replaced yet
            return (f"{shown(entry.path)}: {shown(exc.link)} is a symlink now (to "
                    f"{shown(exc.target)}); left as it is")  # fmt: skip
        except Moved as exc:
            return f"{shown(entry.path)}: {shown(str(exc))}; left as it is"
        except (OSError, ToolError) as exc:
            return f"{shown(entry.path)}: {shown(str(exc))}"


def _undo(undo: Undo, entry: Entry) -> str:
    try:
        spot = undo.reach(entry, entry.path)
    except Missing:
        if not entry.parent_dirs or entry.after is not None or _was_nothing(entry):
            return "absent"  # its folder is gone: nothing of the commit is left there
        # A removal that went on to remove the folders it emptied: they come back with
        # the file (they were there when the journal was written).
        spot = undo.reach(entry, entry.path, make_parents=True)
    with spot:
        for tmp in {entry.tmp, tmp_name(spot.name, undo.tag)}:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    unlink(spot, tmp)
        if entry.unknown:
            return "done"
        state = _state(spot)
        if _matches_before(state, entry):
            return "unchanged"
        is_after = state == ("file", entry.after) or (state is None and entry.after is None)
        if not is_after and not (state is not None and state[0] == "link" and entry.after
                                 == link_after(state[1])):  # fmt: skip
            return "conflict"
        # Each put back in one rename (through the journal's temporary name): a
        # recovery killed here leaves the path as after or as before, never empty.
        if entry.before_link is not None:
            symlink_atomic(spot, entry.before_link, undo.tag)
        elif entry.before is None:
            unlink(spot)
        else:
            write_atomic(spot, entry.before, entry.before_mode, tag=undo.tag)
        return "restored"


def _make_again(undo: Undo, entry: Entry) -> str:
    """An empty folder the commit removed: made again (with the folders above it the
    commit removed too) when nothing is there."""
    with undo.reach(entry, entry.path, make_parents=True) as spot:
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
