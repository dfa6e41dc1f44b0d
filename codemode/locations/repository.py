"""Where the repository around a directory starts: a leaf module, used both for the
instructions (AGENTS.md up to the root) and for skill discovery (``.codemode/skills``)."""

from __future__ import annotations

from pathlib import Path


def repository_root(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` holding ``.git``."""
    for directory in [cwd, *cwd.parents]:
        if (directory / ".git").exists():
            return directory
    return None
