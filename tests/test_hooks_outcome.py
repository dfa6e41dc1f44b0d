"""What a hook's exit status and output mean, event by event (the reading of one run;
the runs themselves are real processes in the other hook tests)."""

from __future__ import annotations

import json

import pytest

from codemode.hooks.definitions import HookDef, parse_table
from codemode.hooks.engine import Combined, _merge
from codemode.hooks.outcome import HookOutcome, read_outcome
from codemode.hooks.process import ProcessResult, argv_for


def ran(code: int | None = 0, out: object = "", err: str = "") -> ProcessResult:
    text = out if isinstance(out, str) else json.dumps(out)
    return ProcessResult(exit_code=code, stdout=text, stderr=err)


def test_exit_status_two_blocks_with_stderr_as_the_reason() -> None:
    assert read_outcome("PreToolUse", ran(2, err="nope\n")).decision == "deny"
    assert read_outcome("PermissionRequest", ran(2, err="nope")).decision == "deny"
    stop = read_outcome("Stop", ran(2, err="keep going"))
    assert (stop.decision, stop.reason) == ("block", "keep going")
    assert "nothing on stderr" in (read_outcome("Stop", ran(2)).reason or "")


@pytest.mark.parametrize(("run", "says"), [
    (ran(1, err="boom"), "exited with status 1: boom"),
    (ran(-9), "killed by signal 9"),
    (ran(0, "{not json"), "invalid JSON"),
    (ran(0, {"continue": "yes"}), "continue must be true or false"),
    (ran(0, {"decision": "maybe"}), "is not block"),
    (ran(0, {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                    "permissionDecision": "perhaps"}}), "not allow, deny or ask"),
    (ran(0, {"hookSpecificOutput": {"hookEventName": "Stop"}}), "not 'PreToolUse'"),
    (ran(0, {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": [1]}}),
     "updatedInput must be an object"),
    (ran(0, [1, 2]), "expected a JSON object"),
    (ProcessResult(exit_code=None, timed_out=True), "timed out"),
    (ProcessResult(exit_code=None, flooded=True), "too much output"),
    (ProcessResult(exit_code=None, error="cannot start it: No such file"), "cannot start"),
])
def test_failures_are_named(run: ProcessResult, says: str) -> None:
    outcome = read_outcome("PreToolUse", run)
    assert outcome.failure is not None and says in outcome.failure
    assert outcome.decision is None  # the engine applies the event's default


def test_a_block_without_a_reason_is_a_failure_where_the_reason_is_the_point() -> None:
    assert "needs a reason" in (read_outcome("Stop", ran(0, {"decision": "block"})).failure or "")
    # A guard that blocks without saying why still blocks.
    assert read_outcome("PreToolUse", ran(0, {"decision": "block"})).decision == "deny"


def test_json_answers() -> None:
    pre = read_outcome("PreToolUse", ran(0, {
        "systemMessage": "checked",
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                               "permissionDecisionReason": "look first",
                               "updatedInput": {"command": "ls"},
                               "additionalContext": "ctx"}}))
    assert (pre.decision, pre.reason, pre.updated_input, pre.additional_context,
            pre.system_message) == ("ask", "look first", {"command": "ls"}, "ctx", "checked")
    perm = read_outcome("PermissionRequest", ran(0, {"hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}))
    assert perm.decision == "allow"
    stop = read_outcome("Stop", ran(0, {"continue": False, "stopReason": "enough"}))
    assert stop.stop and stop.stop_reason == "enough"
    legacy = read_outcome("PreToolUse", ran(0, {"decision": "block", "reason": "old form"}))
    assert (legacy.decision, legacy.reason) == ("deny", "old form")


def test_plain_text_is_context_only_where_it_means_that() -> None:
    assert read_outcome("SessionStart", ran(0, "use make ci")).additional_context == "use make ci"
    assert read_outcome("UserPromptSubmit", ran(0, "x")).additional_context == "x"
    assert read_outcome("PostToolUse", ran(0, "formatted 2 files")) == HookOutcome()


def hook(command: str, event: str = "PreToolUse") -> HookDef:
    return HookDef(event=event, matcher=None, command=command, timeout_s=1, status_message=None,
                   source="t", scope="user")


def test_answers_combine_strictly() -> None:
    combined = Combined()
    _merge(combined, hook("a"), HookOutcome(decision="allow", additional_context="one"))
    _merge(combined, hook("b"), HookOutcome(decision="deny", reason="no"))
    _merge(combined, hook("c"), HookOutcome(decision="ask", updated_input={"x": 1}))
    _merge(combined, hook("d"), HookOutcome(updated_input={"x": 2}, additional_context="two"))
    assert (combined.decision, combined.reason) == ("deny", "no")
    assert combined.decided_by is not None and combined.decided_by.command == "b"
    assert combined.updated_input == {"x": 1} and combined.context == ["one", "two"]


def test_matchers_match_whole_names() -> None:
    found, problems = parse_table({"PreToolUse": [
        {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "f"}]},
        {"matcher": "*", "hooks": [{"type": "command", "command": "g"}]},
        {"matcher": "mcp__.*", "hooks": [{"type": "command", "command": "h"}]}]}, "t", "user")
    assert problems == []
    edit, every, mcp = found
    assert edit.matches(("Write",)) and not edit.matches(("Writer",))
    assert every.matches(("anything",))
    assert mcp.matches(("mcp__srv__tool",)) and not mcp.matches(("shell",))


def test_the_key_follows_the_exact_definition() -> None:
    assert hook("a").key == hook("a").key
    assert hook("a").key != hook("a ").key != hook("a", "Stop").key


def test_plain_commands_skip_the_shell() -> None:
    assert argv_for("/usr/bin/true") == ["/usr/bin/true"]
    assert argv_for("python3 guard.py --strict") == ["python3", "guard.py", "--strict"]
    assert argv_for("./guard.sh | tee log") == ["/bin/sh", "-c", "./guard.sh | tee log"]
    assert argv_for("FOO=1 run") == ["/bin/sh", "-c", "FOO=1 run"]
    assert argv_for("~/bin/guard") == ["/bin/sh", "-c", "~/bin/guard"]
