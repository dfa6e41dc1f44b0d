"""What one walk of a tree (``codemode.tools.ignore.walk_files``) may read and hold, and
how it says which folders a bound kept it from walking whole.

``grep``, ``glob`` and ``/undo``'s snapshot scan walk, in codemode's own process, a
workspace a confined command can write: a command makes a folder of millions of entries
in a minute, and the walk must then cost what these bounds allow, not the folder's size
(docs/threat-model.md, "Host-side reads and walks"). A walk a bound cut is not silent:
``Cuts.note`` names the first folder cut and why, so a search cut short never looks
complete, and ``Cuts.rules_note`` the first ``.gitignore`` not honoured, so a search that
looked at more files than git would says so.

The ``.gitignore`` files are bounded too: what compiling them costs (lines of new content
per walk, bytes of one file) and what matching paths against them costs. No count bounds
the latter: one RE2 search costs the path's length times the pattern's size (34 ms for 64
patterns such as ``*a??????????????c`` against a path of 4,000 bytes), so the walk spends
at most ``MAX_MATCH_SECONDS`` of CPU matching (a search's glob too), and ends (cut,
said) past it. Only that
bound depends on the machine's speed; a real tree's matching costs a fraction of it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

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
# The most bytes of one .gitignore honoured (the largest of GitHub's templates is ~7 KB;
# one of 10,000 patterns, ~200 KB, is honoured): a file of 1 MB took 4 s to compile and
# held 115 MB, kept for the next search (``ignore_rules``).
MAX_IGNORE_FILE_BYTES = 256 * 1024
# The most lines of .gitignore files compiled in one walk, one file's or many (a file
# seen before in the walk, compiled once, costs nothing): each pattern compiled holds
# ~3 KB, and 40 folders of 256 KB files took 36 s and 1.5 GB. This many are ~0.5 s and
# ~50 MB. It also bounds one file's patterns, which a path is matched against without a
# pause (64 at a time): what one match may cost past ``MAX_MATCH_SECONDS``.
MAX_IGNORE_LINES = 16_384
# The most CPU seconds one walk spends matching paths against patterns: the .gitignore
# files' and the search's glob (``FileWalk.matches``).
MAX_MATCH_SECONDS = 5.0
# A cut folder's path longer than this is shown with its middle left out: a chain of
# folders thousands deep would otherwise fill the note.
_SHOWN_CHARS = 200


@dataclass(frozen=True)
class WalkLimits:
    """The bounds of one walk (tests lower them: a million entries is slow to make)."""

    folder: int = MAX_FOLDER_ENTRIES
    held: int = MAX_HELD_ENTRIES
    total: int = MAX_WALK_ENTRIES
    ignore_file_bytes: int = MAX_IGNORE_FILE_BYTES
    ignore_lines: int = MAX_IGNORE_LINES
    match_seconds: float = MAX_MATCH_SECONDS


@dataclass(frozen=True)
class Cut:
    """A folder the walk did not walk whole: its path relative to the walk's root (""
    for the root) and why, as a clause ("it holds more than ...")."""

    folder: str
    why: str


class Cuts:
    """The folders one walk did not walk whole: the first one, and how many in all; and
    the folders whose ``.gitignore`` it did not honour (``unheeded``)."""

    def __init__(self) -> None:
        self.first: Cut | None = None
        self.count = 0
        self.unheeded: Cut | None = None
        self.unheeded_count = 0

    def add(self, folder: str, why: str) -> None:
        if self.first is None:
            self.first = Cut(folder, why)
        self.count += 1

    def unheed(self, folder: str, why: str) -> None:
        """``folder``'s .gitignore was not honoured: the walk looked at more, not less."""
        if self.unheeded is None:
            self.unheeded = Cut(folder, why)
        self.unheeded_count += 1

    def rules_note(self, shown_root: str) -> str | None:
        """Which .gitignore was not honoured and why; None when every one was. (``/undo``'s
        scan needs none: it then records more files, which it can put back as well.)"""
        if self.unheeded is None:
            return None
        folder = _shortened(_joined(shown_root, self.unheeded.folder))
        text = f"the .gitignore in {folder} was not honoured ({self.unheeded.why})"
        if self.unheeded_count > 1:
            more = self.unheeded_count - 1
            text += f", nor {more:,} more after it"
        return text + ": files it ignores may be included"

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


def match_cut(limits: WalkLimits) -> str:
    """Why the walk ended in a folder: matching took its time."""
    return (
        "matching paths against patterns (the .gitignore files' and the search's) took "
        f"the walk's limit of {limits.match_seconds:g} s of CPU, and the walk ended there"
    )


class _Compiled(Protocol):
    """A compiled .gitignore (``ignore_rules.Rules``), as far as the budget counts it."""

    @property
    def groups(self) -> tuple[object, ...]: ...


_R = TypeVar("_R", bound=_Compiled)


class RulesBudget:
    """What one walk may spend compiling ``.gitignore`` files, counted in lines (each
    pattern compiled holds ~3 KB, whatever its length): ``refusal`` before one is
    compiled, ``charge`` once it is."""

    def __init__(self, limits: WalkLimits) -> None:
        self.limits = limits
        self.spent = 0
        # Compiled files are kept by content (``ignore_rules``): a file seen in this walk
        # comes back as the same object, which costs nothing more.
        self._seen: dict[bytes, object] = {}

    def refusal(self, size: int, lines: int | None = None, digest: bytes = b"") -> str | None:
        """Why a .gitignore of ``size`` bytes (``lines`` lines that are not blank, where
        they are known, and content ``digest``) is not compiled, or None."""
        limits = self.limits
        if size > limits.ignore_file_bytes:
            return f"it holds more than {limits.ignore_file_bytes:,} bytes"
        if lines is None:
            return None
        if lines > limits.ignore_lines:
            return f"it holds more than {limits.ignore_lines:,} lines"
        if self.spent + (0 if digest in self._seen else lines) > limits.ignore_lines:
            return (
                f"the walk had compiled {self.spent:,} lines of .gitignore files, "
                f"of at most {limits.ignore_lines:,}"
            )
        return None

    def heeded(
        self,
        cuts: Cuts,
        folder: str,
        path: Path,
        dir_fd: int | None,
        load: Callable[[], _R | None],
    ) -> _R | None:
        """The rules ``load`` reads from the .gitignore at ``path`` (``.gitignore`` in
        ``dir_fd`` where given), or None: none there, or this budget refuses them (then
        ``cuts`` says so, naming ``folder``). The file is read first, as ``load`` reads
        it, to count its lines: compiling is what costs."""
        from codemode.tool_terms.errors import ToolError
        from codemode.tools.fs.reading import read_in, read_resolved

        name: Path | str = ".gitignore" if dir_fd is not None else path
        cap = self.limits.ignore_file_bytes
        try:  # followed, as the read follows a link: its target's size is what is read
            st = os.stat(name, dir_fd=dir_fd)
            if not stat.S_ISREG(st.st_mode):
                return None  # not read at all (``load`` refuses it)
            why = self.refusal(st.st_size)
            if why is None:
                link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
                if dir_fd is None or link:
                    data = read_resolved(path, cap)
                else:
                    data = read_in(dir_fd, ".gitignore", cap, path)
                lines = sum(1 for line in data.splitlines() if line.strip())
                digest = hashlib.sha256(data).digest()
                why = self.refusal(len(data), lines, digest)
        except (OSError, ToolError):  # gone, swapped, or grown past the bound meanwhile
            return None
        if why is not None:
            cuts.unheed(folder, why)
            return None
        rules = load()
        if rules is not None:
            self._charge(rules, lines, digest)
        return rules

    def _charge(self, rules: _Compiled, lines: int, digest: bytes) -> None:
        """Count ``rules``, compiled from ``lines`` lines of content ``digest``: nothing
        when they are the object this walk compiled from that content before."""
        if self._seen.get(digest) is rules.groups:
            return
        self._seen[digest] = rules.groups
        # A file that grew after it was counted costs its patterns: the next is refused.
        patterns = sum(len(getattr(group, "patterns", ())) for group in rules.groups)
        self.spent += max(lines, patterns)


def too_long(path_max: int) -> str:
    return f"the paths of entries in it pass the kernel's limit of {path_max:,} bytes"


def _joined(shown_root: str, rel: str) -> str:
    if not rel:
        return shown_root
    if shown_root in ("", "."):
        return rel
    return shown_root + rel if shown_root.endswith("/") else f"{shown_root}/{rel}"


def shown_path(path: str) -> str:
    """``path`` as a note shows it: escapes for what a terminal would act on, and its
    middle left out past ``_SHOWN_CHARS``."""
    return _shortened(path)


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
