"""The hooks format and one hook as found.

A hooks table maps an event name to matcher groups, each a ``matcher`` (a regular
expression; empty or ``*``: everything) and the hooks it runs::

    {"hooks": {"PreToolUse": [{"matcher": "Bash|shell",
                               "hooks": [{"type": "command", "command": "./guard.sh",
                                          "timeout": 30, "statusMessage": "checking"}]}]}}

The same table is ``hooks.json``'s ``hooks`` key, Claude Code's ``settings.json``'s, and
``[[hooks.PreToolUse]]`` / ``[[hooks.PreToolUse.hooks]]`` inline in ``config.toml``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codemode.hooks.places import Scope

# Every event, in the order a session meets them.
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreModelRequest",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "Stop",
    "Interrupt",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse"})
# What a matcher is matched against for the events that are not about a tool: the
# SessionStart source, the compaction trigger, the SessionEnd reason; the others have no
# subject and every group matches.
SUBJECT_EVENTS = frozenset({"SessionStart", "PreCompact", "PostCompact", "SessionEnd"})

# Seconds a hook may run when its definition names no timeout.
DEFAULT_TIMEOUT_S = 60.0
# An Interrupt hook runs while the person waits for the interrupt to take effect: its
# timeout is at most this, as Codex clamps it (0.169 and 0.171: "clamping Interrupt hook
# timeout to 3s").
INTERRUPT_TIMEOUT_S = 3.0


class CommandHookModel(BaseModel):
    """One hook of a matcher group. Only ``type = "command"`` runs here; other fields
    other agents define (``async``, ...) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    type: str = "command"
    command: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    statusMessage: str | None = None


class MatcherGroupModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    matcher: str | None = None
    hooks: list[CommandHookModel] = Field(default_factory=list)


class HooksProblem(Exception):
    """A hooks table that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class HookDef:
    """One hook command as found: its event, matcher, command, limits and where it was
    defined. ``key`` hashes all of these: trust is recorded against it, so a changed
    hook (or the same one moved to another file) is asked about again."""

    event: str
    matcher: str | None
    command: str
    timeout_s: float
    status_message: str | None
    source: str  # the file (or "config.toml [hooks]") it came from
    scope: Scope
    key: str = field(init=False)
    pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = json.dumps(
            [self.source, self.event, self.matcher, self.command, self.timeout_s],
            ensure_ascii=False,
        )
        object.__setattr__(self, "key", hashlib.sha256(text.encode()).hexdigest()[:16])
        # An event without a subject has nothing to match: every group of it matches
        # (Codex runs a PreModelRequest or Interrupt hook whatever its matcher says).
        has_subject = self.event in TOOL_EVENTS or self.event in SUBJECT_EVENTS
        object.__setattr__(self, "pattern",
                           compile_matcher(self.matcher) if has_subject else None)

    def matches(self, subjects: tuple[str, ...]) -> bool:
        """Whether the matcher takes any of ``subjects`` (the names of a tool, or the
        event's subject); a group without a matcher takes everything."""
        if self.pattern is None:
            return True
        return any(self.pattern.fullmatch(s) for s in subjects)

    def describe(self) -> str:
        """The hook in one line, for notices and listings."""
        where = f" [{self.matcher}]" if self.matcher not in (None, "", "*") else ""
        return f"{self.event}{where} `{_short(self.command)}` ({self.source})"


def compile_matcher(matcher: str | None) -> re.Pattern[str] | None:
    """None for a matcher that takes everything; else the whole-name regular expression
    (``Edit|Write`` takes ``Edit`` and ``Write``, not ``Editor``)."""
    if matcher is None or matcher.strip() in ("", "*"):
        return None
    return re.compile(matcher)


def parse_table(table: Any, source: str, scope: Scope) -> tuple[list[HookDef], list[str]]:
    """The hooks in one table (``{EVENT: [groups]}``) and the problems found in it: an
    unknown event, a bad group, a bad regular expression or a hook type that does not run
    here is skipped with a problem; the rest still loads."""
    if not isinstance(table, dict):
        return [], [f"{source}: hooks must be a table of events, not {type(table).__name__}"]
    found: list[HookDef] = []
    problems: list[str] = []
    for event, groups in table.items():
        if event not in EVENTS:
            problems.append(f"{source}: unknown hook event {event!r} (known: {', '.join(EVENTS)})")
            continue
        if not isinstance(groups, list):
            problems.append(f"{source}: hooks.{event} must be a list of matcher groups")
            continue
        for n, raw in enumerate(groups):
            try:
                group = MatcherGroupModel.model_validate(raw)
                compile_matcher(group.matcher)
            except ValidationError as exc:
                problems.append(f"{source}: hooks.{event}[{n}]: {_first_error(exc)}")
                continue
            except re.error as exc:
                problems.append(f"{source}: hooks.{event}[{n}]: matcher {group.matcher!r} is "
                                f"not a valid regular expression ({exc})")
                continue
            for hook in group.hooks:
                if hook.type != "command":
                    problems.append(f"{source}: hooks.{event}[{n}]: {hook.type!r} hooks do "
                                    "not run here (only command hooks do)")
                    continue
                if not (hook.command or "").strip():
                    problems.append(f"{source}: hooks.{event}[{n}]: a command hook without "
                                    "a command")
                    continue
                found.append(
                    HookDef(
                        event=event,
                        matcher=group.matcher,
                        command=hook.command or "",
                        timeout_s=_timeout(event, hook.timeout),
                        status_message=hook.statusMessage,
                        source=source,
                        scope=scope,
                    )
                )
    return found, problems


def _timeout(event: str, given: float | None) -> float:
    seconds = given or DEFAULT_TIMEOUT_S
    return min(seconds, INTERRUPT_TIMEOUT_S) if event == "Interrupt" else seconds


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def _short(command: str, limit: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
