"""One ``.gitignore`` file's patterns, compiled to RE2 and matched the way git does.

A ``.gitignore`` is written by whatever runs in the workspace, so it is treated as
hostile input: it is read like any file the tools read (regular files only, at most
``MAX_GITIGNORE_BYTES``: a FIFO would block a walk for good, ``/dev/zero`` fill memory,
and a bigger file is not honoured, so a search looks at more files, never at fewer);
each line is translated on its own (pathspec's git rules) and compiled with RE2, whose
matching is linear (Python's engine takes minutes on ``*a*a*a*a*a*a*a*a*c`` against a
long name); a line that does not translate or compile is dropped, as git drops a
pattern it cannot use, instead of failing the search. Patterns are matched in groups
(one RE2 alternation per group first), so a file of thousands of lines costs a few
searches per path, and a compiled file is kept (by content) for the next search.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from codemode.tools.context import ToolError

MAX_GITIGNORE_BYTES = 1 << 20
# Patterns tried together in one RE2 alternation before trying them one by one.
_GROUP = 64


class _Searcher(Protocol):
    """A compiled RE2 regex, as far as it is used here."""

    def search(self, text: str, /) -> object: ...


@dataclass(frozen=True)
class _Group:
    """Consecutive patterns (each a regex and whether it ignores, False for ``!``), and
    ``any``, which matches where one of them does (None: RE2 would not compile them
    together, so they are tried one by one)."""

    patterns: tuple[tuple[_Searcher, bool], ...]
    any: _Searcher | None


@dataclass(frozen=True)
class Rules:
    """One ``.gitignore``; ``prefix + rel[strip:]`` turns a walk-relative path into one
    relative to the directory holding the file, which is what its patterns match."""

    groups: tuple[_Group, ...]
    prefix: str
    strip: int

    def verdict(self, rel: str) -> bool | None:
        """True if ignored, False if re-included by a ``!`` pattern, None if no pattern applies."""
        path = self.prefix + rel[self.strip :]
        # The last matching pattern decides, as in git.
        for group in reversed(self.groups):
            if group.any is not None and group.any.search(path) is None:
                continue
            for regex, include in reversed(group.patterns):
                if regex.search(path) is not None:
                    return include
        return None


def load(directory: Path, prefix: str, strip: int) -> Rules | None:
    """The rules of ``directory/.gitignore``, None if there are none (or no usable file)."""
    from codemode.tools.fs.reading import read_resolved

    try:
        data = read_resolved(directory / ".gitignore", MAX_GITIGNORE_BYTES)
    except (OSError, ToolError):  # none, not a regular file, too big, refused
        return None
    groups = _compiled(data)
    return Rules(groups, prefix, strip) if groups else None


def load_in(dir_fd: int, directory: str, prefix: str, strip: int) -> Rules | None:
    """Like ``load``, for the directory open as ``dir_fd`` (``directory``: its path):
    a walk reads each folder's ``.gitignore`` with one open, not a walk from ``/`` down
    to it, which made a tree thousands of folders deep cost the square of its depth. A
    ``.gitignore`` that is a symlink is read as ``load`` reads it, so its target is
    checked as every read's is."""
    import stat

    from codemode.tools.fs.reading import read_in

    try:
        st = os.stat(".gitignore", dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            return load(Path(directory), prefix, strip)
        data = read_in(dir_fd, ".gitignore", MAX_GITIGNORE_BYTES, f"{directory}/.gitignore")
    except (OSError, ToolError):  # none, not a regular file, too big
        return None
    groups = _compiled(data)
    return Rules(groups, prefix, strip) if groups else None


@lru_cache(maxsize=16)
def _compiled(data: bytes) -> tuple[_Group, ...]:
    # Imported here: pathspec and RE2 cost ~30 ms of CPU, and a session loads the
    # tools whether or not anything is ever searched.
    import re2
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    options = re2.Options()
    options.log_errors = False
    kept: list[tuple[_Searcher, bool, str]] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line:
            continue
        try:
            source, include = GitIgnoreSpecPattern.pattern_to_regex(line)
        except ValueError:  # GitIgnorePatternError: "!" alone, a trailing backslash...
            continue
        if source is None or include is None:  # a comment, a blank or no-op line
            continue
        try:
            kept.append((re2.compile(source, options), include, source))
        except re2.error:
            continue
    groups = []
    for at in range(0, len(kept), _GROUP):
        part = kept[at : at + _GROUP]
        # Each pattern names its group "ps_d"; one alternation may not repeat a name.
        joined = "|".join(f"(?:{source.replace('(?P<ps_d>', '(?:')})" for _, _, source in part)
        try:
            any_of: _Searcher | None = re2.compile(joined, options)
        except re2.error:
            any_of = None
        groups.append(_Group(tuple((regex, include) for regex, include, _ in part), any_of))
    return tuple(groups)
