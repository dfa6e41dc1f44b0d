"""What one walk of a tree (``codemode.tools.ignore.walk_files``) may read and hold, and
how it says which folders a bound kept it from walking whole.

``grep``, ``glob`` and ``/undo``'s snapshot scan walk, in codemode's own process, a
workspace a confined command can write: a command makes a folder of millions of entries
in a minute, and the walk must then cost what these bounds allow, not the folder's size
(docs/threat-model.md, "Host-side reads and walks"). A walk a bound cut is not silent:
``Cuts.note`` names the first folder cut and why, so a search cut short never looks
complete.
"""

from __future__ import annotations

from dataclasses import dataclass

# The most entries read of any one folder. Real folders hold far fewer: the largest of
# the Linux kernel's (~80,000 files in all) hold a few thousand entries, and a monorepo's
# crowded ones (node_modules, build output) are ignored and never listed. Past it a folder
# is read in part: one made to flood the walk costs this much, not its size.
MAX_FOLDER_ENTRIES = 50_000
# The most names a walk holds at once: the entries read but not yet visited of every
# folder on its way down (each folder's files wait while the subfolders before them by
# name are walked). A real tree has a few thousand waiting at once, ~100 bytes each;
# at this bound, ~30 MB with every name 255 bytes long (~60 MB if none is UTF-8, each byte then
# a character of two); a tree nested to make its levels' entries wait together is read
# in part past it.
MAX_HELD_ENTRIES = 100_000
# The most directory entries read in all: a big monorepo of a few hundred thousand files
# is searched whole, while a tree of many folders, each short of the limits above, costs
# seconds, not minutes, of a walk that ``/undo`` repeats every turn.
MAX_WALK_ENTRIES = 1_000_000
# A cut folder's path longer than this is shown with its middle left out: a chain of
# folders thousands deep would otherwise fill the note.
_SHOWN_CHARS = 200


@dataclass(frozen=True)
class WalkLimits:
    """The bounds of one walk (tests lower them: a million entries is slow to make)."""

    folder: int = MAX_FOLDER_ENTRIES
    held: int = MAX_HELD_ENTRIES
    total: int = MAX_WALK_ENTRIES


@dataclass(frozen=True)
class Cut:
    """A folder the walk did not walk whole: its path relative to the walk's root (""
    for the root) and why, as a clause ("it holds more than ...")."""

    folder: str
    why: str


class Cuts:
    """The folders one walk did not walk whole: the first one, and how many in all."""

    def __init__(self) -> None:
        self.first: Cut | None = None
        self.count = 0

    def add(self, folder: str, why: str) -> None:
        if self.first is None:
            self.first = Cut(folder, why)
        self.count += 1

    def note(self, shown_root: str, done: str = "searched") -> str | None:
        """What was not ``done`` (searched, scanned) and why, the folder named as the
        user sees it (``shown_root``: the walk's root so); None when the walk was whole."""
        if self.first is None:
            return None
        folder = _joined(shown_root, self.first.folder)
        why = self.first.why
        text = f"not all of the tree was {done}: {_shortened(folder)} was not {done} whole ({why})"
        if self.count > 1:
            more = self.count - 1
            text += f", nor {more:,} more folder{'s' if more > 1 else ''} after it"
        return text


def folder_cut(limits: WalkLimits, room: int, held: int, read: int) -> str:
    """Why a folder was read only ``room`` entries in (``held`` names held, ``read``
    entries read in all when it was opened)."""
    if room == limits.folder:
        why = f"it holds more than {limits.folder:,} entries"
    elif room == limits.total - read:
        why = f"the walk had read its limit of {limits.total:,} directory entries in all"
    else:
        why = (
            f"the walk held {held:,} entries of the folders above it still to visit, "
            f"of at most {limits.held:,} at once"
        )
    if room == 0:
        return why + ", so it was not read"
    return why + f"; {room:,} were read, not its first by name"


def too_long(path_max: int) -> str:
    return f"the paths of entries in it pass the kernel's limit of {path_max:,} bytes"


def _joined(shown_root: str, rel: str) -> str:
    if not rel:
        return shown_root
    if shown_root in ("", "."):
        return rel
    return shown_root + rel if shown_root.endswith("/") else f"{shown_root}/{rel}"


def _shortened(path: str) -> str:
    # A name a command chose may hold a terminal escape or a byte that is not UTF-8
    # (decoded as a lone surrogate): the note shows them as escapes, never raw.
    if not path.isprintable():
        path = "".join(c if c.isprintable() else _escape(c) for c in path)
    if len(path) <= _SHOWN_CHARS:
        return path
    half = _SHOWN_CHARS // 2
    return f"{path[:half]}…({len(path) - 2 * half:,} characters left out)…{path[-half:]}"


def _escape(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")
