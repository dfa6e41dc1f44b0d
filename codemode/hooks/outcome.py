"""What one hook's run means for its event, read as Codex and Claude Code read it.

- exit 0: stdout is the answer. A JSON object is read field by field (``continue``,
  ``stopReason``, ``systemMessage``, ``decision``/``reason``, ``hookSpecificOutput`` with
  ``permissionDecision``, ``permissionDecisionReason``, ``updatedInput``,
  ``additionalContext``, PermissionRequest's ``decision.behavior``); plain text is
  context for the model on SessionStart and UserPromptSubmit and ignored elsewhere.
- exit 2: it blocks, with stderr as the reason (a tool call is denied, a prompt
  refused, a stop refused, a PostToolUse reason goes to the model).
- anything else (another exit status, a signal, a timeout, a flood, output that starts
  like JSON and is not or is nested too deeply to decode, fields of the wrong type): a
  *failure*, one notice, and the event's safe default (``engine.FAILURE_DEFAULTS``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from codemode.hooks.process import ProcessResult

Decision = Literal["allow", "deny", "ask", "block"]
# Characters of a hook's stderr quoted in a notice.
_STDERR_SHOWN = 400
# Events whose plain-text stdout is context for the model.
_TEXT_IS_CONTEXT = frozenset({"SessionStart", "UserPromptSubmit"})
_BLOCKING_EXIT = 2


@dataclass
class HookOutcome:
    decision: Decision | None = None
    reason: str | None = None
    additional_context: str | None = None
    updated_input: Any = None
    stop: bool = False  # "continue": false — end the turn
    stop_reason: str | None = None
    system_message: str | None = None  # shown to the person
    failure: str | None = None  # the hook failed; what happened, in words


class _Bad(Exception):
    pass


def read_outcome(event: str, run: ProcessResult) -> HookOutcome:
    if run.error is not None:
        return HookOutcome(failure=run.error)
    if run.timed_out:
        return HookOutcome(failure="timed out (it was stopped, with everything it started)")
    if run.flooded:
        return HookOutcome(failure="printed too much output (it was stopped)")
    if run.exit_code == _BLOCKING_EXIT:
        reason = run.stderr.strip() or "blocked by a hook (exit status 2, nothing on stderr)"
        return HookOutcome(decision="deny" if event in ("PreToolUse", "PermissionRequest")
                           else "block", reason=reason)
    if run.exit_code != 0:
        how = (f"was killed by signal {-run.exit_code}" if run.exit_code and run.exit_code < 0
               else f"exited with status {run.exit_code}")
        said = run.stderr.strip()
        if said:
            how += f": {_tail(said)}"
        return HookOutcome(failure=how)
    text = run.stdout.strip()
    if not text:
        return HookOutcome()
    if text[0] not in "{[":
        return HookOutcome(additional_context=text if event in _TEXT_IS_CONTEXT else None)
    try:
        data = json.loads(text)
    except ValueError as exc:
        return HookOutcome(failure=f"printed invalid JSON ({exc})")
    except RecursionError:  # ([[[[... under the output cap: the decoder's own limit)
        return HookOutcome(failure="printed JSON nested too deeply")
    try:
        return _from_json(event, data)
    except _Bad as exc:
        return HookOutcome(failure=f"printed JSON that does not fit {event}: {exc}")


def _from_json(event: str, data: Any) -> HookOutcome:
    if not isinstance(data, dict):
        raise _Bad("expected a JSON object")
    out = HookOutcome(
        system_message=_str(data, "systemMessage"),
        stop_reason=_str(data, "stopReason"),
        reason=_str(data, "reason"),
    )
    go_on = data.get("continue", True)
    if not isinstance(go_on, bool):
        raise _Bad("continue must be true or false")
    out.stop = not go_on
    decision = data.get("decision")
    if decision in ("block", "deny"):
        out.decision = "deny" if event == "PreToolUse" else "block"
    elif decision in ("approve", "allow"):
        out.decision = "allow"
    elif decision is not None:
        raise _Bad(f"decision {decision!r} is not block")
    if out.decision == "block" and not (out.reason or "").strip():
        raise _Bad('decision "block" needs a reason')
    specific = data.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict):
            raise _Bad("hookSpecificOutput must be an object")
        _specific(event, specific, out)
    return out


def _specific(event: str, specific: dict[str, Any], out: HookOutcome) -> None:
    named = specific.get("hookEventName")
    if named is not None and named != event:
        raise _Bad(f"hookSpecificOutput.hookEventName is {named!r}, not {event!r}")
    out.additional_context = _str(specific, "additionalContext")
    if event == "PreToolUse":
        decision = specific.get("permissionDecision")
        if decision is not None:
            if decision not in ("allow", "deny", "ask"):
                raise _Bad(f"permissionDecision {decision!r} is not allow, deny or ask")
            out.decision = decision
            out.reason = _str(specific, "permissionDecisionReason") or out.reason
        if "updatedInput" in specific and specific["updatedInput"] is not None:
            if not isinstance(specific["updatedInput"], dict):
                raise _Bad("updatedInput must be an object")
            out.updated_input = specific["updatedInput"]
    elif event == "PermissionRequest":
        decision = specific.get("decision")
        if decision is None:
            return
        if not isinstance(decision, dict) or decision.get("behavior") not in ("allow", "deny"):
            raise _Bad('decision must be {"behavior": "allow" | "deny"}')
        out.decision = "allow" if decision["behavior"] == "allow" else "deny"
        out.reason = _str(decision, "message") or out.reason


def _str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _Bad(f"{key} must be a string")


def _tail(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _STDERR_SHOWN else "…" + line[-_STDERR_SHOWN:]
