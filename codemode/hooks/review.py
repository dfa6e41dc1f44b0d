"""Reviewing hooks: every hook a session here would find, with its source and state,
and trusting or disabling them — what ``/hooks`` and ``interpreter hooks`` show and do.

A hook is named by its key (``HookDef.key``, 16 hex digits: a prefix of at least 4 will
do) or by its number in the listing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode.hooks.definitions import HookDef
from codemode.hooks.discovery import discover
from codemode.hooks.trust import State, TrustStore
from codemode.terminal.control_chars import visible


@dataclass
class Review:
    rows: list[tuple[HookDef, State]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    store: TrustStore | None = None

    def pick(self, names: list[str]) -> list[HookDef]:
        """The hooks ``names`` name (keys, key prefixes or listing numbers); ``all``:
        every project hook not yet trusted. Raises ValueError naming what matched none."""
        if names == ["all"]:
            return [hook for hook, state in self.rows if state == "untrusted"]
        picked: list[HookDef] = []
        for name in names:
            found = _find(self.rows, name)
            if found is None:
                raise ValueError(f"no hook {name!r} (give a number or key from the listing)")
            picked.append(found)
        return picked

    def lines(self) -> list[str]:
        """The listing, one hook per line (and its status message), shown and not obeyed
        by a terminal: a project's file could hold escape sequences."""
        if not self.rows:
            return ["no hooks found"]
        return [visible(f"{n:>2}. [{state}] {hook.key}  {hook.describe()}"
                        + (f"\n      status: {hook.status_message}" if hook.status_message
                           else ""))
                for n, (hook, state) in enumerate(self.rows, start=1)]

    def trusted_lines(self, hook: HookDef) -> list[str]:
        """What trusting ``hook`` does not cover, one line each (shown once it is
        trusted): the folder of a script that cannot be kept (``script_folders``)."""
        if self.store is None:
            return []
        return [visible(f"  note: not covered: {why}") for why in self.store.not_covered(hook)]

    def problem_lines(self) -> list[str]:
        return [visible(f"problem: {p}") for p in self.problems]

    def as_json(self) -> dict[str, Any]:
        return {
            "hooks": [
                {"key": h.key, "event": h.event, "matcher": h.matcher, "command": h.command,
                 "timeout": h.timeout_s, "statusMessage": h.status_message, "source": h.source,
                 "scope": h.scope, "state": state}
                for h, state in self.rows
            ],
            "problems": self.problems,
        }


def review(cwd: Path, home: Path, config_table: Any = None, other_agents: bool = False) -> Review:
    found = discover(cwd, home, config_table, other_agents=other_agents)
    store = TrustStore(home, cwd)
    problems = list(found.problems) + ([store.problem] if store.problem else [])
    return Review([(hook, store.state(hook)) for hook in found.hooks], problems, store)


def _find(rows: list[tuple[HookDef, State]], name: str) -> HookDef | None:
    if name.isdigit() and 1 <= int(name) <= len(rows) and len(name) < 4:
        return rows[int(name) - 1][0]
    if len(name) >= 4:
        matches = [hook for hook, _ in rows if hook.key.startswith(name.lower())]
        if len(matches) == 1:
            return matches[0]
    return None
