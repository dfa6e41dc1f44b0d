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
from typing import TYPE_CHECKING, Protocol

from codemode.tools.context import ToolError

if TYPE_CHECKING:
    # Imported where a .gitignore is read: pathspec (with its RE2 and Hyperscan
    # backends) costs ~30 ms of CPU, and a session loads this module with its tools
    # whether or not anything is ever searched.
    import pathspec


# A .gitignore is read like any file the tools read: regular files only (a FIFO would
# block the walk for good, /dev/zero fill memory), at most this many bytes. A bigger one
# is not honoured: the search then looks at more files, never at fewer.
MAX_GITIGNORE_BYTES = 1 << 20
# Patterns tried together in one RE2 alternation before trying them one by one.
_GROUP = 64


class _Searcher(Protocol):
    """A compiled RE2 regex, as far as it is used here."""

    def search(self, text: str, /) -> object: ...


@dataclass(frozen=True)
class _Group:
    """Consecutive patterns of one ``.gitignore`` and ``any``, which matches where one
    of them does (None when RE2 would not compile them together)."""

    patterns: list[pathspec.Pattern]
    any: _Searcher | None


@dataclass(frozen=True)
class _Rules:
    """One ``.gitignore``; ``prefix + rel[strip:]`` turns a walk-relative path into one
    relative to the directory holding the file, which is what its patterns match."""

    groups: list[_Group]
    prefix: str
    strip: int

    def verdict(self, rel: str) -> bool | None:
        """True if ignored, False if re-included by a ``!`` pattern, None if no pattern applies."""
        path = self.prefix + rel[self.strip :]
        # The last matching pattern decides, as in git. Going through the patterns
        # ourselves (rather than match_file) tells "no match" apart from "negated". A
        # group none of whose patterns match is passed over with one search, so a
        # .gitignore of thousands of lines costs a few searches per path, not thousands.
        for group in reversed(self.groups):
            if group.any is not None and group.any.search(path) is None:
                continue
            for pattern in reversed(group.patterns):
                if pattern.match_file(path) is not None:
                    return bool(pattern.include)
        return None


def _load(directory: Path, prefix: str, strip: int) -> _Rules | None:
    from codemode.tools.fs.reading import read_regular

    try:
        data = read_regular(directory / ".gitignore", MAX_GITIGNORE_BYTES)
    except (OSError, ToolError):  # none, not a regular file, too big, refused
        return None
    import pathspec

    text = data.decode("utf-8", errors="replace")
    # The "simple" backend: the others compile every pattern into one RE2 or Hyperscan
    # set, which a .gitignore of a few thousand lines makes fail ("failed to compile
    # Set"), failing the whole search. Patterns are matched by ``_Rules`` instead.
    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines(), backend="simple")
    groups = _linear(spec)
    return _Rules(groups, prefix, strip) if groups else None


def _linear(spec: pathspec.GitIgnoreSpec) -> list[_Group]:
    """``spec``'s patterns matched with RE2 instead of Python's re, in groups. A
    .gitignore is written by whatever runs in the workspace, and Python's engine takes
    minutes to match a line such as ``*a*a*a*a*a*a*a*a*c`` against a long name; RE2 is
    linear. A pattern RE2 cannot compile is dropped, as are no-op patterns."""
    import re2  # lazy: RE2 loads with the first .gitignore

    options = re2.Options()
    options.log_errors = False
    kept: list[tuple[pathspec.Pattern, str]] = []
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if pattern.include is None or regex is None:
            continue
        try:
            pattern.regex = re2.compile(regex.pattern, options)
        except re2.error:
            continue
        kept.append((pattern, regex.pattern))
    groups = []
    for at in range(0, len(kept), _GROUP):
        part = kept[at : at + _GROUP]
        # Each pattern names its group "ps_d"; one alternation may not repeat a name.
        joined = "|".join(f"(?:{source.replace('(?P<ps_d>', '(?:')})" for _, source in part)
        try:
            any_of = re2.compile(joined, options)
        except re2.error:
            any_of = None  # tried one by one
        groups.append(_Group([pattern for pattern, _ in part], any_of))
    return groups


def _inherited_rules(root: Path, top: Path | None) -> list[_Rules]:
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
        found = _load(directory, below, 0)
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
    rules: list[_Rules],
    respect: bool,
    stop: Callable[[], bool] | None,
    max_depth: int | None = None,
) -> Iterator[str]:
    # A stack, not recursion: a tree thousands of folders deep (a hostile repository)
    # must not end the walk with RecursionError. Order as before: depth first, sorted.
    stack: list[tuple[Path, str, list[_Rules]] | str] = [(directory, rel_dir, rules)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
            continue
        if stop is not None and stop():
            return
        here, rel_here, here_rules = item
        if respect:
            own = _load(here, "", len(rel_here) + 1 if rel_here else 0)
            if own:
                here_rules = [*here_rules, own]
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable directories are skipped, as find and rg do
        todo: list[tuple[Path, str, list[_Rules]] | str] = []
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


def _ignored(rules: list[_Rules], rel: str) -> bool:
    # Deeper .gitignore files take precedence over shallower ones.
    for r in reversed(rules):
        verdict = r.verdict(rel)
        if verdict is not None:
            return verdict
    return False
