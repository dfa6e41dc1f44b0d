"""Choosing among the repositories: ``--include`` / ``--exclude`` globs on their paths
and ``--contains``, a pattern some file in the repository must match.

A glob with a ``/`` is matched against the repository's whole (resolved) path, one
without against its name; ``*`` also crosses ``/``. The content filter is a Python
regular expression searched in every file of the working copy (VCS metadata,
symlinks and files over ``CONTENT_BYTES`` left out), bytes against bytes, so files in
any encoding are searched. The summary and the report's header say how many
repositories each filter dropped.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from codemode.batch.workcopy import VCS_DIRS

CONTENT_BYTES = 10_000_000


@dataclass
class Filters:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    contains: str | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.include:
            out["include"] = self.include
        if self.exclude:
            out["exclude"] = self.exclude
        if self.contains is not None:
            out["contains"] = self.contains
        return out


class FilterError(ValueError):
    """A filter that cannot be used (a bad regular expression)."""


def _matches(repo: Path, pattern: str) -> bool:
    return fnmatchcase(str(repo) if "/" in pattern else repo.name, pattern)


def _contains(repo: Path, pattern: re.Pattern[bytes]) -> bool:
    # A loop (os.walk recurses once per level in Python 3.11: a repository an earlier
    # session's command made thousands of folders deep ended it in RecursionError), and
    # each file opened without following a link or waiting on a FIFO.
    stack = [str(repo)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in VCS_DIRS:
                        stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False) and _search(entry.path, pattern):
                    return True
            except OSError:
                continue
    return False


def _search(path: str, pattern: re.Pattern[bytes]) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CONTENT_BYTES:
            return False
        return pattern.search(file.read(CONTENT_BYTES + 1)) is not None


def apply_filters(repos: list[Path], filters: Filters) -> tuple[list[Path], dict[str, int]]:
    """The repositories every filter keeps, and how many each filter dropped (in the
    order include, exclude, contains; each counts only what got past the ones before)."""
    try:
        content = re.compile(filters.contains.encode()) if filters.contains else None
    except re.error as exc:
        raise FilterError(f"--contains {filters.contains!r}: {exc}") from None
    dropped: dict[str, int] = {}
    kept = repos
    if filters.include:
        kept = [r for r in kept if any(_matches(r, p) for p in filters.include)]
        dropped["include"] = len(repos) - len(kept)
    if filters.exclude:
        before = len(kept)
        kept = [r for r in kept if not any(_matches(r, p) for p in filters.exclude)]
        dropped["exclude"] = before - len(kept)
    if content is not None:
        before = len(kept)
        kept = [r for r in kept if _contains(r, content)]
        dropped["contains"] = before - len(kept)
    return kept, dropped
