"""Walking a directory tree the way git sees it: ``.git/`` and ignored paths left out.

Each ``.gitignore`` applies to the directory holding it and everything below, and a
deeper file overrides a shallower one, as in git. ``.gitignore`` files above the walked
directory count too, up to the repository root, so searching ``src/`` still honours the
rules in the project's top-level ``.gitignore``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from codemode.tools.folder_handles import FolderHandles
from codemode.tools.ignore_rules import Rules, load, load_in


def _inherited_rules(root: Path, top: Path | None) -> list[Rules]:
    """Rules from ``.gitignore`` files in the ancestors of ``root``, outermost first.

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
        found = load(directory, below, 0)
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
) -> Iterator[str]:
    """Yield the files under ``root`` as posix paths relative to it, depth first.

    ``.git`` directories are always skipped. With ``respect_gitignore``, paths ignored
    by ``.gitignore`` files (in ``root``, below it, or in its ancestors up to
    ``ignore_top``/the repository root) are skipped too. Symlinked directories are not
    followed; symlinks to files are yielded. ``stop`` is polled at every entry so a long
    walk can be abandoned. ``max_depth`` yields only files at most that many components
    deep (and descends no further): a glob without ``**`` such as ``*.py`` or
    ``src/*.ts`` need not walk the whole tree.
    """
    inherited = _inherited_rules(root, ignore_top) if respect_gitignore else []
    yield from _walk(root, "", inherited, respect_gitignore, stop, max_depth)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# The longest path the kernel takes (Linux's PATH_MAX, with its terminating NUL).
_PATH_MAX = 4096


def _walk(
    directory: Path,
    rel_dir: str,
    rules: list[Rules],
    respect: bool,
    stop: Callable[[], bool] | None,
    max_depth: int | None = None,
) -> Iterator[str]:
    # A stack, not recursion: a tree thousands of folders deep (a hostile repository)
    # must not end the walk with RecursionError. Order as before: depth first, sorted.
    # What each folder costs does not grow with its depth either (else such a tree costs
    # the square of its depth): its path, relative path and depth are carried down from
    # its parent, and it is opened once, relative to its parent (``FolderHandles``), its
    # .gitignore read and its entries listed through that descriptor.
    root = _Folder(str(directory), rel_dir, rules, rel_dir.count("/"), None, "")
    stack: list[_Folder | str] = [root]
    handles = FolderHandles(_DIR_FLAGS)
    try:
        yield from _walk_stack(stack, handles, respect, stop, max_depth)
    finally:
        handles.close()


def _walk_stack(
    stack: list[_Folder | str],
    handles: FolderHandles,
    respect: bool,
    stop: Callable[[], bool] | None,
    max_depth: int | None,
) -> Iterator[str]:
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
            continue
        if stop is not None and stop():
            return
        here, rel_here, here_rules = item.path, item.rel, item.rules
        if len(os.fsencode(here)) >= _PATH_MAX:
            # Not walked, as when folders were opened by path: its files could only be
            # read by a walk down their path in Python (``read_resolved``), each costing
            # the depth again.
            continue
        try:
            # A subfolder was listed as a folder, not a symlink: if it has been swapped
            # for one since, it is skipped, not followed.
            fd = handles.enter(item, item.parent, item.name, here)
            if respect:
                own = load_in(fd, here, "", len(rel_here) + 1 if rel_here else 0)
                if own:
                    here_rules = [*here_rules, own]
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable directories are skipped, as find and rg do
        # A subfolder's depth: the number of "/" in its relative path.
        below = item.depth + 1 if rel_here else 0
        # A folder of k components holds files of k + 1.
        descend = max_depth is None or below + 2 <= max_depth
        todo: list[_Folder | str] = []
        for entry in entries:
            # Polled per entry too: a huge .gitignore over a huge folder is slow to match.
            if stop is not None and stop():
                return
            if entry.name == ".git":
                continue
            rel = f"{rel_here}/{entry.name}" if rel_here else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if respect and _ignored(here_rules, rel + "/" if is_dir else rel):
                continue
            if is_dir:
                if descend:
                    path = os.path.join(here, entry.name)
                    todo.append(_Folder(path, rel, here_rules, below, item, entry.name))
            elif _is_file(entry):  # follows symlinks: broken links and sockets drop out here
                todo.append(rel)
        stack.extend(reversed(todo))


@dataclass(frozen=True)
class _Folder:
    """A folder still to walk: its path, its path relative to the walk's root (whose
    ``depth`` is the number of ``/`` in it), the rules that apply in it, and the folder
    holding it (None for the walk's root) and its name there."""

    path: str
    rel: str
    rules: list[Rules]
    depth: int
    parent: _Folder | None
    name: str


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a link the kernel will not let us follow (/proc/1/cwd)
        return False


def _ignored(rules: list[Rules], rel: str) -> bool:
    # Deeper .gitignore files take precedence over shallower ones.
    for r in reversed(rules):
        verdict = r.verdict(rel)
        if verdict is not None:
            return verdict
    return False
