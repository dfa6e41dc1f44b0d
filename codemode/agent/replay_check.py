"""Checking a replay against its recording: did the tools do what they did then?

A replay feeds the model's recorded replies back, so the replies cannot react to what
the tools do now. If the tools fail where they succeeded (the wrong workspace, a changed
file), the recorded final answer ("all tests pass") would be a lie. So every tool
outcome of the replay is compared with the recording's, in the order the calls started,
and the first difference is reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

# The items that are tool calls (top-level or made by a program), and how to name one.
_CALL_TYPES = ("command_execution", "tool_call", "file_change", "mcp_tool_call", "code_execution")


def _label(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == "command_execution":
        return f"$ {item.get('command', '')}"
    if kind == "tool_call":
        return str(item.get("name", "tool"))
    if kind == "mcp_tool_call":
        return f"{item.get('server')}.{item.get('tool')}"
    if kind == "file_change":
        return "apply_patch"
    return "program"


def _outcome(item: dict[str, Any]) -> str:
    status = str(item.get("status", "?"))
    if item.get("type") == "command_execution" and item.get("exit_code") is not None:
        return f"{status}, exit {item['exit_code']}"
    return status


class Outcomes:
    """Tool outcomes in the order their calls started: (label, outcome) pairs."""

    def __init__(self) -> None:
        self._order: list[str] = []
        self._items: dict[str, dict[str, Any]] = {}

    def add(self, event: dict[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, dict) or item.get("type") not in _CALL_TYPES:
            return
        key = str(item.get("id"))
        if event.get("type") == "item.started" and key not in self._items:
            self._order.append(key)
            self._items[key] = item
        elif event.get("type") == "item.completed":
            if key not in self._items:
                self._order.append(key)
            self._items[key] = item

    def __call__(self, event: BaseModel) -> None:
        """A session listener."""
        if getattr(event, "type", "") in ("item.started", "item.completed"):
            self.add(event.model_dump(mode="json"))

    def pairs(self) -> list[tuple[str, str]]:
        return [(_label(self._items[k]), _outcome(self._items[k])) for k in self._order]


def recorded_outcomes(path: Path) -> Outcomes:
    """The tool outcomes a session file recorded."""
    outcomes = Outcomes()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "event":
            event = record.get("event")
            if isinstance(event, dict):
                outcomes.add(event)
    return outcomes


def difference(recorded: Outcomes, replayed: Outcomes) -> str | None:
    """One line saying where the replay's tool outcomes differ, or None. A failed
    program is usually the consequence of a failed call inside it: the first differing
    call that is not a program is named when there is one."""
    then, now = recorded.pairs(), replayed.pairs()
    found: list[str] = []
    for n, (old, new) in enumerate(zip(then, now, strict=False), 1):
        if old == new:
            continue
        if old[0] != new[0]:
            found.append(f"call {n} is {new[0]!r} now, {old[0]!r} in the recording")
            break  # past here the calls no longer line up
        line = f"{old[0]} (call {n}): {new[1]} now, {old[1]} in the recording"
        if old[0] != "program":
            return line
        found.append(line)
    if found:
        return found[0]
    if len(then) != len(now):
        return f"{len(now)} tool calls now, {len(then)} in the recording"
    return None
