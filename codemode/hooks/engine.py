"""A session's hooks: which match an event, running them, combining their answers.

All hooks matching one event run at once (concurrently, like Claude Code's); an
identical command defined twice runs once. Their answers combine strictly: any deny
wins over ask, ask over allow; the first hook (in discovery order) that changed a tool's
input decides the input; every ``additionalContext`` is kept; any ``continue: false``
stops.

When a hook fails (``outcome``), the event takes its safe default (``FAILURE_DEFAULTS``):
a failed PreToolUse guard *denies* the call. A guard exists to stop calls; one that
could not answer has not said the call is safe, and letting it through unseen would make
a broken guard look like a working one. The cost is one refused call, with a message
naming the hook and what went wrong, that the model (or the program, which can catch
it) sees and the person is told about once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codemode.hooks import project_runners, script_scan
from codemode.hooks.confined import run_confined
from codemode.hooks.definitions import EVENTS, TOOL_EVENTS, HookDef
from codemode.hooks.outcome import HookOutcome, read_outcome
from codemode.hooks.process import argv_for, project_env, run_command
from codemode.locations import launcher
from codemode.sandbox.protection import hook_files

if TYPE_CHECKING:
    from codemode.sandbox.session import SandboxSession

# What an event does when one of its hooks fails: "deny" the call (PreToolUse), or
# "continue" as if the hook had said nothing (a PermissionRequest hook that fails
# leaves the decision to the approver, which refuses when there is none).
FAILURE_DEFAULTS: dict[str, Literal["deny", "continue"]] = {
    event: ("deny" if event == "PreToolUse" else "continue") for event in EVENTS
}


@dataclass
class SessionFacts:
    """What every hook's input says about the session (updated as it changes)."""

    cwd: Path
    session_id: str = ""
    model: str = ""
    transcript_path: str | None = None
    permission_mode: str = "default"
    turn_id: str | None = None


@dataclass
class HookRun:
    """One hook running (``outcome`` None) or done, for whoever shows hooks."""

    id: str
    event: str
    hook: HookDef
    parent_id: str | None = None
    outcome: HookOutcome | None = None
    duration_ms: float = 0.0


@dataclass
class Combined:
    """All the hooks of one event firing, answered together."""

    decision: str | None = None  # allow / deny / ask / block
    reason: str | None = None
    decided_by: HookDef | None = None
    context: list[str] = field(default_factory=list)
    updated_input: Any = None
    stop: bool = False
    stop_reason: str | None = None
    ran: int = 0

    def reason_text(self) -> str:
        """The reason with the hook it came from: what a refusal says."""
        hook = self.decided_by
        who = f"{hook.event} hook `{hook.command}` ({hook.source})" if hook else "a hook"
        return f"{who}: {self.reason or 'no reason given'}"


_RANK = {"deny": 3, "block": 3, "ask": 2, "allow": 1}

Listener = Callable[[HookRun], None]


class HookEngine:
    """The hooks a session runs (already filtered by trust), and how it runs them."""

    def __init__(
        self,
        hooks: Iterable[HookDef],
        facts: SessionFacts,
        *,
        env: dict[str, str] | None = None,
        listeners: Sequence[Listener] = (),
        trusted_files: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.facts = facts
        # Scripts written for Claude Code find their project this way.
        self.env = project_env(env if env is not None else os.environ, facts.cwd)
        self.listeners: list[Listener] = list(listeners)
        self._ids = itertools.count(1)
        # The session's sandbox, where hooks that run a project's tool run
        # (``hooks.confined``); None: every hook runs outside, as the user's commands do.
        self.sandbox: SandboxSession | None = None
        self.set_hooks(hooks, trusted_files)
        # Context hooks added for the model outside a program (a classic call's
        # PostToolUse): the session delivers it with the next request.
        self.pending_context: list[str] = []
        # Set when a hook said ``continue: false``: the turn ends after its calls.
        self.stop_request: str | None = None

    def set_hooks(
        self, hooks: Iterable[HookDef], trusted_files: dict[str, dict[str, str]] | None = None
    ) -> None:
        """Run these hooks from now on (the person trusted or disabled some);
        ``trusted_files``: by hook key, the digests of the files its command names that a
        command could have written (the launcher refuses one that changed)."""
        self.hooks = list(hooks)
        self.trusted_files = dict(trusted_files or {})
        # Kept read-only for commands while this engine runs these hooks: a confined
        # command could otherwise swap one between the launcher's check and the start.
        hook_files.hold(self, (f for files in self.trusted_files.values() for f in files))
        self._by_event: dict[str, list[HookDef]] = {}
        for hook in self.hooks:
            self._by_event.setdefault(hook.event, []).append(hook)
        self._matching: dict[tuple[str, tuple[str, ...]], tuple[HookDef, ...]] = {}
        # Why each hook's scripts start what its trust does not cover (``script_scan``),
        # by key, from content that matched what was trusted: only a finding is kept.
        # "Nothing found" depends on the workspace too (``sh configure`` counts once a
        # ``configure`` exists), which a command may change before the next run.
        self._scanned: dict[str, list[str]] = {}
        # Read on every tool call: a call with no tool hook at all pays one lookup.
        self.tool_hooks = any(e in self._by_event for e in TOOL_EVENTS)

    def has(self, event: str) -> bool:
        return event in self._by_event

    def matching(self, event: str, subjects: tuple[str, ...] = ()) -> tuple[HookDef, ...]:
        """The hooks of ``event`` whose matcher takes one of ``subjects`` (remembered:
        this runs on every tool call)."""
        key = (event, subjects)
        found = self._matching.get(key)
        if found is None:
            seen: set[str] = set()
            picked = []
            for hook in self._by_event.get(event, ()):
                if hook.command not in seen and hook.matches(subjects):
                    seen.add(hook.command)
                    picked.append(hook)
            found = self._matching[key] = tuple(picked)
        return found

    def base_input(self, event: str) -> dict[str, Any]:
        facts = self.facts
        data: dict[str, Any] = {
            "session_id": facts.session_id,
            "transcript_path": facts.transcript_path,
            "cwd": str(facts.cwd),
            "hook_event_name": event,
            "model": facts.model,
            "permission_mode": facts.permission_mode,
        }
        if facts.turn_id is not None:
            data["turn_id"] = facts.turn_id
        return data

    async def fire(
        self,
        event: str,
        fields: dict[str, Any],
        subjects: tuple[str, ...] = (),
        *,
        hooks: tuple[HookDef, ...] | None = None,
        parent_id: str | None = None,
        timeout_cap: float | None = None,
    ) -> Combined:
        """Run the matching hooks of ``event`` with ``fields`` added to the common input,
        and combine their answers. ``timeout_cap``: no hook of this firing runs longer
        (a SessionEnd after an interrupt)."""
        chosen = self.matching(event, subjects) if hooks is None else hooks
        combined = Combined()
        if not chosen:
            return combined
        data = json.dumps({**self.base_input(event), **fields}, default=_jsonable,
                          ensure_ascii=False).encode()
        if len(chosen) == 1:  # (no task to make: this runs around every hooked call)
            outcomes = [await self._run(chosen[0], data, parent_id, timeout_cap)]
        else:
            outcomes = list(await asyncio.gather(
                *(self._run(hook, data, parent_id, timeout_cap) for hook in chosen)))
        for hook, outcome in zip(chosen, outcomes, strict=True):
            _merge(combined, hook, outcome)
        return combined

    async def _run(self, hook: HookDef, data: bytes, parent_id: str | None,
                   timeout_cap: float | None = None) -> HookOutcome:
        run = HookRun(id=f"hook_{next(self._ids)}", event=hook.event, hook=hook,
                      parent_id=parent_id)
        self._tell(run)
        timeout_s = hook.timeout_s if timeout_cap is None else min(hook.timeout_s, timeout_cap)
        trusted = self.trusted_files.get(hook.key, {})
        # A project's tool (``make``, ``npx``...), named by the hook or started by its
        # scripts: it runs what the workspace holds.
        project = bool(project_runners.notes(argv_for(hook.command), self.facts.cwd, self.env)
                       or self._scripts_start(hook, trusted))
        if self.sandbox is not None and project:
            done = await run_confined(self.sandbox, hook.command, data, cwd=self.facts.cwd,
                                      env=self.env, timeout_s=timeout_s, trusted=trusted)
        else:
            done = await run_command(hook.command, data, cwd=self.facts.cwd, env=self.env,
                                     timeout_s=timeout_s, trusted=trusted)
        outcome = read_outcome(hook.event, done)
        if project and outcome.decision == "allow":
            # Its answer is the workspace's code, which a command could rewrite to
            # approve whatever it asks: it may refuse, never grant.
            outcome.decision = None
        if outcome.failure is not None and FAILURE_DEFAULTS[hook.event] == "deny":
            outcome.decision = "deny"
            outcome.reason = f"the hook failed: {outcome.failure}"
        run.outcome, run.duration_ms = outcome, done.duration_ms
        self._tell(run)
        return outcome

    def _scripts_start(self, hook: HookDef, trusted: dict[str, str]) -> bool:
        found = self._scanned.get(hook.key)
        if found is None:
            named = launcher.named_files(argv_for(hook.command), self.facts.cwd, self.env)
            got = script_scan.scan(named, trusted, self.facts.cwd, self.env)
            if got.exact and got.reasons:  # (else read again next time)
                self._scanned[hook.key] = got.reasons
            found = got.reasons
        return bool(found)

    def _tell(self, run: HookRun) -> None:
        for listener in self.listeners:
            listener(run)


def _merge(into: Combined, hook: HookDef, outcome: HookOutcome) -> None:
    into.ran += 1
    if outcome.decision is not None and _RANK[outcome.decision] > _RANK.get(
        into.decision or "", 0
    ):
        into.decision, into.reason, into.decided_by = outcome.decision, outcome.reason, hook
    elif outcome.decision is not None and outcome.decision == into.decision and outcome.reason:
        # Two blocks: the model reads both reasons.
        if outcome.decision == "block" and into.reason != outcome.reason:
            into.reason = f"{into.reason}\n{outcome.reason}" if into.reason else outcome.reason
    if outcome.additional_context:
        into.context.append(outcome.additional_context)
    if outcome.updated_input is not None and into.updated_input is None:
        into.updated_input = outcome.updated_input
    if outcome.stop:
        into.stop = True
        into.stop_reason = into.stop_reason or outcome.stop_reason


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
