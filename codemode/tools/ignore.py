"""Walking a directory tree the way git sees it: ``.git/`` and ignored paths left out.

Each ``.gitignore`` applies to the directory holding it and everything below, and a
deeper file overrides a shallower one, as in git. ``.gitignore`` files above the walked
directory count too, up to the repository root, so searching ``src/`` still honours the
rules in the project's top-level ``.gitignore``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from codemode.tools.ignore_rules import Rules, load


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
    stack: list[tuple[Path, str, list[Rules]] | str] = [(directory, rel_dir, rules)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
            continue
        if stop is not None and stop():
            return
        here, rel_here, here_rules = item
        if respect:
            own = load(here, "", len(rel_here) + 1 if rel_here else 0)
            if own:
                here_rules = [*here_rules, own]
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable directories are skipped, as find and rg do
        todo: list[tuple[Path, str, list[Rules]] | str] = []
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
                # A folder of k components holds files of k + 1.
                if max_depth is None or rel.count("/") + 2 <= max_depth:
                    todo.append((Path(entry.path), rel, here_rules))
            elif _is_file(entry):  # follows symlinks: broken links and sockets drop out here
                todo.append(rel)
        stack.extend(reversed(todo))


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
