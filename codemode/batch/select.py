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
    for top, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in VCS_DIRS]
        for name in files:
            path = os.path.join(top, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > CONTENT_BYTES:
                    continue
                with open(path, "rb") as file:
                    if pattern.search(file.read()):
                        return True
            except OSError:
                continue
    return False


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
