"""A tool call cut off by the output-token limit, junk tool-call arguments, and refusals
that no retry can change: the next request is always one a strict server accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import WIRES, call, provider_flags, run_cli

from codemode.agent.cutoff import RAW_ARGUMENTS, history_arguments, settle_reply
from codemode.providers.base import AssistantMessage, FreeformSpec, ToolCall, ToolSpec
from codemode_testkit.scripted_server import ScriptedModelServer

CUT = '{"pattern": "x", "path": ".", "max_results":'


def exec_cli(server: ScriptedModelServer, wire: str, *args: str, home: Path, cwd: Path):
    return run_cli(["exec", *provider_flags(server.base_url, wire), *args], home=home, cwd=cwd)


def sent_calls(body: dict[str, Any], wire: str) -> list[tuple[str, Any]]:
    """(name, arguments as the server will parse them) of every call in a request."""
    out: list[tuple[str, Any]] = []
    if wire == "chat":
        for m in body["messages"]:
            for c in m.get("tool_calls") or []:
                out.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
    elif wire == "responses":
        for item in body["input"]:
            if item.get("type") == "function_call":
                out.append((item["name"], json.loads(item["arguments"])))
    else:
        for m in body["messages"]:
            for part in m["content"] if isinstance(m["content"], list) else []:
                if part.get("type") == "tool_use":
                    out.append((part["name"], part["input"]))
    return out


@pytest.mark.parametrize("wire", WIRES)
def test_a_cut_off_call_is_not_run_nor_sent_back(wire: str, home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("list_dir", {"path": "."}), call("grep", CUT)],
         "stop_reason": "length"},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, wire, "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert len(server.requests) == 2
    second = server.requests[1].body
    calls = sent_calls(second, wire)  # json.loads raises if any is not JSON
    assert [name for name, _ in calls] == ["list_dir"]
    text = json.dumps(second)
    assert "cut off by the output-token limit" in text and "call to grep" in text
    assert "notes.txt" in text  # the complete call did run
    assert "max_results\\\":" not in text


def test_a_reply_that_is_only_a_cut_off_call_gets_the_note(home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("grep", CUT)], "stop_reason": "length"},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    messages = server.requests[1].body["messages"]
    assert [m["role"] for m in messages[-2:]] == ["assistant", "user"]
    assert "tool_calls" not in messages[-2] or not messages[-2]["tool_calls"]
    assert "was not run" in messages[-1]["content"]
    assert "cut off" in run.stderr  # a notice the user sees too


def test_the_note_names_the_configured_limit(home: Path, work: Path) -> None:
    script = [{"tool_calls": [call("grep", CUT)], "stop_reason": "length"}, {"text": "ok"}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "-c", "max_output_tokens=77", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert server.requests[0].body["max_tokens"] == 77
    assert "(77 tokens)" in json.dumps(server.requests[1].body)


def test_a_model_cut_off_every_time_stops_the_turn(home: Path, work: Path) -> None:
    script = [{"tool_calls": [call("grep", CUT)], "stop_reason": "length"}] * 5
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 1
    assert len(server.requests) == 3  # codemode.agent.strikes.MAX_FORMAT_REMINDERS
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("wire", WIRES)
def test_junk_arguments_run_as_an_error_and_go_back_as_json(
    wire: str, home: Path, work: Path
) -> None:
    script = [
        {"tool_calls": [call("shell", '{"command": "echo hi"'),
                        call("read_file", "{'path': 'notes.txt',}")]},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, wire, "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    calls = dict(sent_calls(server.requests[1].body, wire))
    assert calls["shell"] == {RAW_ARGUMENTS: '{"command": "echo hi"'}
    assert calls["read_file"] == {"path": "notes.txt"}  # repaired, as it ran
    text = json.dumps(server.requests[1].body)
    assert "not valid JSON" in text and "alpha" in text


def test_a_refusal_of_the_history_is_not_retried(home: Path, work: Path) -> None:
    message = ("Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] "
               "parse error at line 1, column 79")
    with ScriptedModelServer([{"status": 500, "error_message": message}] * 3) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 1
    assert len(server.requests) == 1
    assert "not valid JSON" in run.stderr and "Traceback" not in run.stderr


def test_the_same_server_error_twice_is_not_sent_a_third_time(home: Path, work: Path) -> None:
    script = [{"status": 500, "error_message": "boom at step 7"}] * 4 + [{"text": "late"}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 1
    assert len(server.requests) == 2
    assert "same answer 2 times" in run.stderr or "boom at step 7" in run.stderr


def test_different_server_errors_are_still_retried(home: Path, work: Path) -> None:
    script = [{"status": 500, "error_message": "boom 1"},
              {"status": 500, "error_message": "boom 2"}, {"text": "made it"}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert "made it" in run.stdout


# --- the rules, directly -----------------------------------------------------------------

EXEC = ToolSpec(name="exec", description="run", freeform=FreeformSpec(field="code"))
GREP = ToolSpec(name="grep", description="search", parameters={
    "type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}})


def test_settle_keeps_a_complete_last_call_of_a_length_reply() -> None:
    message = AssistantMessage(tool_calls=[ToolCall(id="a", name="grep",
                                                    arguments='{"pattern": "x"}')])
    settled = settle_reply(message, "length", [GREP])
    assert settled.dropped == [] and settled.run.tool_calls == message.tool_calls


def test_settle_drops_only_under_length() -> None:
    message = AssistantMessage(tool_calls=[ToolCall(id="a", name="grep", arguments=CUT)])
    assert settle_reply(message, "length", [GREP]).dropped
    kept = settle_reply(message, "tool_calls", [GREP])
    assert not kept.dropped and kept.run.tool_calls[0].arguments == CUT
    assert json.loads(kept.history.tool_calls[0].arguments) == {RAW_ARGUMENTS: CUT}


def test_raw_javascript_for_exec_is_kept_as_its_program() -> None:
    call_ = ToolCall(id="a", name="exec", arguments="console.log(1)")
    assert json.loads(history_arguments(call_, EXEC)) == {"code": "console.log(1)"}
    freeform = ToolCall(id="b", name="exec", arguments="console.log(1)", freeform=True)
    assert history_arguments(freeform, EXEC) == "console.log(1)"


def test_non_object_json_is_wrapped() -> None:
    for raw in ("[1, 2]", '"just a string"', "42"):
        text = history_arguments(ToolCall(id="a", name="grep", arguments=raw), GREP)
        assert isinstance(json.loads(text), dict)
