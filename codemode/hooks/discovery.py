"""Where hooks come from, layer by layer; every matching hook of every layer runs.

- user: ``$CODEMODE_HOME/hooks.json`` and ``[hooks]`` inline in ``config.toml``;
- project: ``.codemode/hooks.json`` at the repository's root (the workspace when it is
  not in a repository) and in the workspace, when that is deeper;
- with ``hooks_from_other_agents = true``: where Codex and Claude Code users keep theirs,
  ``~/.codex/hooks.json`` (``$CODEX_HOME``) and ``~/.claude/settings.json`` as user
  hooks, ``.codex/hooks.json``, ``.claude/settings.json`` and
  ``.claude/settings.local.json`` of the project as project hooks.

A file that cannot be read or parsed is a problem (shown once), never a crash: the other
layers still load.

A user's hooks file that really lies (after its symlinks) in the workspace or another
folder a confined command of this or an earlier session could have written — a
``hooks.json`` symlinked into a dotfiles checkout, a ``~/.claude/settings.json`` in a home
that was once the workspace — is read as a *project* file: what it holds may be a
program's, so its hooks run only once trusted, as defined there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode.hooks.definitions import HookDef, parse_table
from codemode.hooks.places import Scope, hook_files
from codemode.locations import small_files
from codemode.locations.host_programs import writable_root_of


@dataclass
class Discovered:
    hooks: list[HookDef] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, found: tuple[list[HookDef], list[str]]) -> None:
        self.hooks.extend(found[0])
        self.problems.extend(found[1])


def discover(
    cwd: Path,
    home: Path,
    config_table: Any = None,
    *,
    other_agents: bool = False,
    user_home: Path | None = None,
) -> Discovered:
    """Every hook defined for a session in ``cwd``; ``home`` is codemode's home,
    ``config_table`` the config's ``[hooks]`` table, ``user_home`` the person's home
    (where Codex and Claude Code keep theirs)."""
    out = Discovered()
    files = hook_files(cwd, home, other_agents=other_agents, user_home=user_home)
    # The config's own table comes right after the home's hooks.json: both are the user's.
    out.add(read_file(*_demoted(files[0], cwd, out)))
    if config_table:
        out.add(parse_table(config_table, f"{home / 'config.toml'} [hooks]", "user"))
    for path, scope in files[1:]:
        out.add(read_file(*_demoted((path, scope), cwd, out)))
    return out


def _demoted(place: tuple[Path, Scope], cwd: Path, out: Discovered) -> tuple[Path, Scope]:
    """A user file a command could have written, as a project file (with a problem
    saying why)."""
    path, scope = place
    if scope != "user" or not path.exists():
        return place
    real = path.resolve()
    root = writable_root_of(str(real))
    if root is None and real.is_relative_to(cwd.resolve()):
        root = str(cwd)
    if root is None:
        return place
    out.problems.append(
        f"{path} lies in {root} (as {real}), where a confined command could have written "
        "it: its hooks run only once trusted, like a project's")
    return path, "project"


def read_file(path: Path, scope: Scope) -> tuple[list[HookDef], list[str]]:
    """The hooks in a JSON file whose ``hooks`` key is a hooks table (none when the file
    does not exist or has no ``hooks`` key: a Claude Code settings file may have none)."""
    try:
        text = small_files.read_text(path)
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})"]
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], [f"{path}: not valid JSON ({exc})"]
    if not isinstance(data, dict):
        return [], [f"{path}: expected a JSON object with a \"hooks\" key"]
    if "hooks" not in data:
        return [], []
    return parse_table(data["hooks"], str(path), scope)
