"""Walking a directory tree the way git sees it: ``.git/`` and ignored paths left out.

Each ``.gitignore`` applies to the directory holding it and everything below, and a
deeper file overrides a shallower one, as in git. ``.gitignore`` files above the walked
directory count too, up to the repository root, so searching ``src/`` still honours the
rules in the project's top-level ``.gitignore``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from codemode.tools.folder_handles import FolderHandles
from codemode.tools.ignore_rules import Rules, load, load_in
from codemode.tools.walk_bounds import Cuts, RulesBudget, WalkLimits, folder_cut, match_cut
from codemode.tools.walk_bounds import too_long as too_long_cut


def _inherited_rules(root: Path, top: Path | None, budget: RulesBudget, cuts: Cuts) -> list[Rules]:
    """Rules from ``.gitignore`` files in the ancestors of ``root``, outermost first
    (within ``budget``: one it refuses is in ``cuts``).

    The ancestors considered run up to ``top`` or, if that lies inside a git repository,
    up to the repository root, but never past the filesystem root.
    """
    if top is None or not (root == top or root.is_relative_to(top)):
        top = root
    # Widen to the enclosing repository so a workspace that is a subfolder of a repo
    # still sees the repo's top-level rules.
    for candidate in [top, *top.parents]:
        if (candidate / ".git").exists():
            top = candidate
            break
    rules = []
    ancestors = [root, *root.parents]
    for directory in reversed(ancestors[1 : ancestors.index(top) + 1]):
        below = root.relative_to(directory).as_posix() + "/"
        shown = os.path.relpath(directory, root)
        read = functools.partial(load, directory, below, 0)
        found = budget.heeded(cuts, shown, directory / ".gitignore", None, read)
        if found:
            rules.append(found)
    return rules


def walk_files(
    root: Path,
    *,
    respect_gitignore: bool = True,
    ignore_top: Path | None = None,
    stop: Callable[[], bool] | None = None,
    max_depth: int | None = None,
    limits: WalkLimits | None = None,
) -> FileWalk:
    """The files under ``root`` as posix paths relative to it, depth first, sorted by
    name within each folder.

    ``.git`` directories are always skipped. With ``respect_gitignore``, paths ignored
    by ``.gitignore`` files (in ``root``, below it, or in its ancestors up to
    ``ignore_top``/the repository root) are skipped too. Symlinked directories are not
    followed; symlinks to files are yielded. ``stop`` is polled at every entry read, so
    a long walk (or the listing of a flooded folder) can be abandoned. ``max_depth``
    yields only files at most that many components deep (and descends no further): a
    glob without ``**`` such as ``*.py`` or ``src/*.ts`` need not walk the whole tree.

    The walk reads and holds no more entries than ``limits`` allow (by default those of
    ``codemode.tools.walk_bounds``); the folders it could not walk whole are in the
    result's ``cuts``, complete once the walk has ended.
    """
    cuts = Cuts()
    state = _Walk(respect_gitignore, stop, max_depth, limits or WalkLimits(), cuts)
    return FileWalk(_walk(root, ignore_top, state), cuts, state)


class FileWalk(Iterator[str]):
    """A walk's relative paths, and (``cuts``) the folders it did not walk whole."""

    def __init__(self, paths: Generator[str, None, None], cuts: Cuts, state: _Walk) -> None:
        self._paths = paths
        self.cuts = cuts
        self._state = state

    def matches(self, regex: _FullMatcher, rel: str) -> bool:
        """Whether ``regex`` matches all of ``rel`` (a search's glob), its CPU time
        counted with the walk's matching: past the limit the walk ends (said in
        ``cuts``), as a glob such as ``**/*a??????????????c`` costs ~0.1 ms a name."""
        clock = time.thread_time
        started = clock()
        try:
            return regex.fullmatch(rel) is not None
        finally:
            self._state.spend(clock() - started)

    def __next__(self) -> str:
        return next(self._paths)

    def close(self) -> None:
        """Let go of the walk's open folders now, not when it is collected."""
        self._paths.close()


class _FullMatcher(Protocol):
    """A compiled RE2 regex, as far as ``FileWalk.matches`` uses it."""

    def fullmatch(self, text: str, /) -> object: ...


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# The longest path the kernel takes (Linux's PATH_MAX, with its terminating NUL).
_PATH_MAX = 4096


class _Stopped(Exception):
    """``stop`` said so while a folder was being read."""


@dataclass(frozen=True)
class _RuleChain:
    """The rules that apply in a folder, innermost first: each folder with a
    ``.gitignore`` adds one link to its parent's chain, so a tree thousands deep, one in
    each folder, costs one link a folder, not a list as long as its depth."""

    rules: Rules
    outer: _RuleChain | None


@dataclass(frozen=True)
class _Folder:
    """A folder to walk: its path (and that path's length in bytes), its path relative
    to the walk's root (whose ``depth`` is the number of ``/`` in it), the rules that
    apply above it, and the folder holding it (None for the walk's root) and its name
    there."""

    path: str
    size: int
    rel: str
    rules: _RuleChain | None
    depth: int
    parent: _Folder | None
    name: str


@dataclass
class _Listed:
    """A folder read: the rules in it, and the names of its files and subfolders still
    to visit, each list sorted with the next last (popped, so a name visited is let go)."""

    folder: _Folder
    rules: _RuleChain | None
    files: list[str]
    dirs: list[str]

    def pop(self) -> tuple[str, bool] | None:
        """The next name by name, and whether it is a folder; None when all are visited."""
        if self.files and (not self.dirs or self.files[-1] < self.dirs[-1]):
            return self.files.pop(), False
        if self.dirs:
            return self.dirs.pop(), True
        return None


class _Walk:
    """One walk's state: its open folders, what it has read and holds, and its cuts."""

    def __init__(
        self,
        respect: bool,
        stop: Callable[[], bool] | None,
        max_depth: int | None,
        limits: WalkLimits,
        cuts: Cuts,
    ) -> None:
        self.respect, self.stop, self.max_depth = respect, stop, max_depth
        self.limits, self.cuts = limits, cuts
        self.handles = FolderHandles(_DIR_FLAGS)
        self.read = 0  # directory entries read, all folders together
        self.held = 0  # names read and not yet visited
        self.budget = RulesBudget(limits)
        self.matching = 0.0  # CPU seconds spent matching paths against .gitignore rules
        self.matched_out = False  # ... past ``limits.match_seconds``: nothing more is read

    def read_folder(self, folder: _Folder) -> _Listed | None:
        """Read ``folder``: None when it cannot be (unreadable folders are skipped, as
        find and rg skip them) or a bound left no room for it (then it is cut)."""
        room = min(
            self.limits.folder,
            self.limits.held - self.held,
            self.limits.total - self.read,
        )
        if room <= 0 and self.read >= self.limits.total:
            # Nothing more is read: it is not even opened to see whether it is empty.
            self.cuts.add(folder.rel, folder_cut(self.limits, 0, self.held, self.read))
            return None
        try:
            # A subfolder was listed as a folder, not a symlink: if it has been swapped
            # for one since, it is skipped, not followed.
            fd = self.handles.enter(folder, folder.parent, folder.name, folder.path)
            rules = folder.rules
            if self.respect:
                start = len(folder.rel) + 1 if folder.rel else 0
                read = functools.partial(load_in, fd, folder.path, "", start)
                ignore = Path(folder.path, ".gitignore")
                own = self.budget.heeded(self.cuts, folder.rel, ignore, fd, read)
                if own:
                    rules = _RuleChain(own, rules)
            listed = _Listed(folder, rules, [], [])
            with os.scandir(fd) as entries:
                self._read(listed, entries, max(room, 0))
        except OSError:
            return None
        listed.files.sort(reverse=True)
        listed.dirs.sort(reverse=True)
        self.held += len(listed.files) + len(listed.dirs)
        return listed

    def _read(self, listed: _Listed, entries: Iterator[os.DirEntry[str]], room: int) -> None:
        # Each entry is kept as a name or let go as it is read: the folder is never held
        # as DirEntry objects, and never past ``room`` entries.
        folder, rules, stop, respect = listed.folder, listed.rules, self.stop, self.respect
        prefix = folder.rel + "/" if folder.rel else ""
        below = folder.depth + 1 if folder.rel else 0  # a subfolder's depth
        # A folder of k components holds files of k + 1.
        descend = self.max_depth is None or below + 2 <= self.max_depth
        # Past this many characters a name may make a path the kernel refuses.
        near = (_PATH_MAX - folder.size - 2) // 4
        seen = 0
        too_long = False
        try:
            for entry in entries:
                # Polled per entry: a folder of millions, or a huge .gitignore, is slow.
                if stop is not None and stop():
                    raise _Stopped
                if seen == room:  # one more than there is room for: it holds more
                    why = folder_cut(self.limits, room, self.held, self.read)
                    self.cuts.add(folder.rel, why)
                    break
                seen += 1
                name = entry.name
                if name == ".git":
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if respect and rules is not None:
                    ignored = self.ignored(rules, prefix + name + "/" if is_dir else prefix + name)
                    if ignored is None:  # matching took the walk's time: it ends here
                        break
                    if ignored:
                        continue
                if len(name) > near and folder.size + 1 + len(os.fsencode(name)) >= _PATH_MAX:
                    too_long = True  # neither opened nor read by path: the kernel refuses it
                    continue
                if is_dir:
                    if descend:
                        listed.dirs.append(name)
                elif _is_file(entry):  # follows links: broken ones and sockets drop out here
                    listed.files.append(name)
        finally:
            self.read += seen
        if too_long:
            self.cuts.add(folder.rel, too_long_cut(_PATH_MAX))

    def ignored(self, chain: _RuleChain | None, rel: str) -> bool | None:
        """Whether the rules ignore ``rel`` (deeper .gitignore files take precedence over
        shallower ones); None once matching has taken the walk's time. The clock is read
        between files' rules: a chain of thousands, each with costly patterns, is where
        one path's match may take seconds."""
        if self.matched_out:
            return None
        clock = time.thread_time
        started = clock()
        left = self.limits.match_seconds - self.matching
        try:
            while chain is not None:
                verdict = chain.rules.verdict(rel)
                if verdict is not None:
                    return verdict
                chain = chain.outer
                if chain is not None and clock() - started > left:
                    self.matched_out = True
                    return None
            return False
        finally:
            self.spend(clock() - started)

    def spend(self, seconds: float) -> None:
        """Count ``seconds`` of CPU spent matching paths against patterns."""
        self.matching += seconds
        if self.matching > self.limits.match_seconds:
            self.matched_out = True

    def child(self, listed: _Listed, name: str) -> _Folder:
        parent = listed.folder
        return _Folder(
            os.path.join(parent.path, name),
            parent.size + 1 + len(os.fsencode(name)),
            f"{parent.rel}/{name}" if parent.rel else name,
            listed.rules,
            parent.depth + 1 if parent.rel else 0,
            parent,
            name,
        )


def _walk(root: Path, ignore_top: Path | None, walk: _Walk) -> Generator[str, None, None]:
    # A stack of folders being walked, not recursion: a tree thousands of folders deep
    # (a hostile repository) must not end the walk with RecursionError. What each folder
    # costs does not grow with its depth either (else such a tree costs the square of its
    # depth): its path, relative path and depth are carried down from its parent, and it
    # is opened once, relative to its parent (``FolderHandles``), its .gitignore read and
    # its entries listed through that descriptor. Only names wait on the stack, not paths
    # as long as their depth.
    chain: _RuleChain | None = None
    cuts, stop = walk.cuts, walk.stop
    if walk.respect:
        for rules in _inherited_rules(root, ignore_top, walk.budget, cuts):
            chain = _RuleChain(rules, chain)
    path = str(root)
    top = _Folder(path, len(os.fsencode(path)), "", chain, 0, None, "")
    try:
        if top.size >= _PATH_MAX:
            cuts.add("", too_long_cut(_PATH_MAX))
            return
        first = walk.read_folder(top)
        stack = [first] if first else []
        while stack:
            listed = stack[-1]
            if walk.matched_out:  # matching took the walk's time: it ends here
                cuts.add(listed.folder.rel, match_cut(walk.limits))
                return
            step = listed.pop()
            if step is None:
                stack.pop()
                continue
            walk.held -= 1
            name, is_dir = step
            if not is_dir:
                rel = listed.folder.rel
                yield f"{rel}/{name}" if rel else name
                continue
            if stop is not None and stop():
                return
            inner = walk.read_folder(walk.child(listed, name))
            if inner is not None:
                stack.append(inner)
    except _Stopped:
        return
    finally:
        walk.handles.close()


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a link the kernel will not let us follow (/proc/1/cwd)
        return False
