"""The files hooks are read from, layer by layer (see ``discovery``); importing nothing
heavy, so that a run with no hooks anywhere pays only for looking."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from codemode.locations.repository import repository_root

HOOKS_FILE = "hooks.json"
PROJECT_DIR = ".codemode"

Scope = Literal["user", "project"]


def hook_files(
    cwd: Path, home: Path, *, other_agents: bool = False, user_home: Path | None = None
) -> list[tuple[Path, Scope]]:
    """Every file hooks may be read from, in order, with its scope."""
    files: list[tuple[Path, Scope]] = [(home / HOOKS_FILE, "user")]
    roots = project_roots(cwd)
    files += [(root / PROJECT_DIR / HOOKS_FILE, "project") for root in roots]
    if other_agents:
        person = user_home or Path.home()
        codex_home = Path(os.environ.get("CODEX_HOME") or person / ".codex")
        files += [(codex_home / HOOKS_FILE, "user"), (person / ".claude" / "settings.json", "user")]
        for root in roots:
            files += [
                (root / ".codex" / HOOKS_FILE, "project"),
                (root / ".claude" / "settings.json", "project"),
                (root / ".claude" / "settings.local.json", "project"),
            ]
    return files


def project_roots(cwd: Path) -> list[Path]:
    """The repository's root and the workspace (once when they are the same)."""
    cwd = cwd.resolve()
    root = repository_root(cwd) or cwd
    return [root] if root == cwd else [root, cwd]


def any_hooks(cwd: Path, home: Path, raw: dict[str, Any]) -> bool:
    """Whether any hook could be defined for ``cwd``: a hooks table in the config, or a
    file where hooks are read from."""
    if raw.get("hooks"):
        return True
    other = bool(raw.get("hooks_from_other_agents"))
    return any(path.is_file() for path, _ in hook_files(cwd, home, other_agents=other))
