"""A reply cut off by the output-token limit that the server does not call cut off:
llama.cpp's servers end a tool call cut by max_tokens with ``finish_reason:
"tool_calls"`` and the call half written, with the usage at the limit (llama-server's
shape) or no usage at all (llama-cpp-python's). The half-written call must not run;
the model is told it was cut off. Driven through ``interpreter exec`` against the
scripted server emitting exactly those wire shapes; the real servers are in
test_local_model.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import WIRES, call, provider_flags, run_cli

from codemode.providers.base import Usage
from codemode.providers.output_limit import settle_stop_reason, stops_inside_json
from codemode_testkit.scripted.encoding import split_args
from codemode_testkit.scripted_server import ScriptedModelServer

LIMIT = 40
AT_LIMIT = Usage(input_tokens=300, output_tokens=LIMIT).model_dump()
BELOW = Usage(input_tokens=300, output_tokens=LIMIT - 10).model_dump()
CUT_NOTE = "cut off by the output-token limit"


def exec_cli(
    server: ScriptedModelServer, *args: str, home: Path, cwd: Path, wire: str = "chat"
) -> Any:
    flags = provider_flags(server.base_url, wire)
    return run_cli(["exec", *flags, "-c", f"max_output_tokens={LIMIT}", *args, "go"],
                   home=home, cwd=cwd)


def without_usage(arguments: str) -> int:
    """``end_after_events`` for a one-call chat reply that stops after its finish_reason
    chunk: no usage chunk and no [DONE], as llama-cpp-python's stream has no usage."""
    return 1 + 1 + len(split_args(arguments)) + 1  # role, call head, pieces, finish


# A program whose cut leaves a complete first statement: run as it came, it would
# create first.txt though the model never finished writing it.
PROGRAM_CUT = "await tools.shell({command: 'touch first.txt'});\nawait tools.shell({comm"


@pytest.mark.parametrize(("wire", "freeform"), [(w, False) for w in WIRES] + [("responses", True)])
def test_a_cut_program_at_the_reported_limit_is_not_run(
    wire: str, freeform: bool, home: Path, work: Path
) -> None:
    script = [
        {"tool_calls": [call("exec", PROGRAM_CUT, freeform=freeform)],
         "stop_reason": "tool_calls", "usage": AT_LIMIT},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "--code-mode", home=home, cwd=work, wire=wire)
    assert run.code == 0, run.stderr
    assert not (work / "first.txt").exists()
    second = json.dumps(server.requests[1].body)
    assert CUT_NOTE in second and "call to exec" in second
    assert "touch first.txt" not in second  # the unfinished call is not in the history
    assert "cut off" in run.stderr  # the user is told too


def test_a_cut_call_without_usage_is_reported_as_cut(home: Path, work: Path) -> None:
    cut = '{"command": "touch a.txt; rm -rf /Users/us'
    script = [
        {"tool_calls": [call("shell", cut)], "stop_reason": "tool_calls",
         "end_after_events": without_usage(cut)},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, home=home, cwd=work)
    assert run.code == 0, run.stderr
    second = server.requests[1].body["messages"]
    assert CUT_NOTE in second[-1]["content"] and "call to shell" in second[-1]["content"]
    assert not second[-2].get("tool_calls")  # dropped, not sent back half written
    assert not (work / "a.txt").exists()


def test_a_call_cut_before_its_arguments_is_not_run_with_none(home: Path, work: Path) -> None:
    # The name streamed, then the limit: no argument text at all.
    script = [
        {"tool_calls": [call("list_dir", "")], "stop_reason": "tool_calls", "usage": AT_LIMIT},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, home=home, cwd=work)
    assert run.code == 0, run.stderr
    second = server.requests[1].body["messages"]
    assert not any(m["role"] == "tool" for m in second)
    assert CUT_NOTE in second[-1]["content"]


def test_a_complete_call_at_the_limit_still_runs(home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("shell", {"command": "touch done.txt"})],
         "stop_reason": "tool_calls", "usage": AT_LIMIT},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert (work / "done.txt").exists()
    assert CUT_NOTE not in json.dumps(server.requests[1].body)


def test_junk_below_the_limit_is_junk_not_a_cut(home: Path, work: Path) -> None:
    """Usage under the limit says the model ended the call itself: the harness reports
    the bad JSON (as it did before), nothing is called cut off."""
    script = [
        {"tool_calls": [call("shell", '{"command": "touch junk.txt"')],
         "stop_reason": "tool_calls", "usage": BELOW},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, home=home, cwd=work)
    assert run.code == 0, run.stderr
    second = json.dumps(server.requests[1].body)
    assert "not valid JSON" in second and CUT_NOTE not in second
    assert not (work / "junk.txt").exists()


# --- the rules, directly -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "inside"),
    [
        ('{"path": "/Users', True),
        ('{"path": "a", "n":', True),
        ('{"a": [1, 2', True),
        ('{"a": "b\\"', True),  # an escaped quote does not close the string
        ("{", True),
        ('{"path": "a"}', False),
        ('{"path": "a"} trailing', False),  # closed: junk, not a cut
        ('{"a": "}"}', False),
        ("console.log(1", False),  # not JSON: nothing to tell from its shape
        ("", False),
    ],
)
def test_stops_inside_json(text: str, inside: bool) -> None:
    assert stops_inside_json(text) is inside


def test_settle_stop_reason() -> None:
    settle = settle_stop_reason
    assert settle("length", limit=None, output_tokens=0) == "length"
    assert settle("tool_calls", limit=10, output_tokens=10) == "length"
    assert settle("stop", limit=10, output_tokens=9) == "stop"
    # Reasoning the server counts apart may lie outside the limit (DeepSeek's reasoner).
    assert settle("tool_calls", limit=10, output_tokens=30, reasoning_tokens=25) == "tool_calls"
    assert settle("tool_calls", limit=10, output_tokens=0, pieces=10) == "length"
    assert settle("tool_calls", limit=None, output_tokens=0, last_arguments='{"a": "') == "length"
    # Usage reported below the limit: an open call is the model's own junk.
    assert settle("tool_calls", limit=10, output_tokens=5, last_arguments='{"a": "') == (
        "tool_calls")
    assert settle("tool_calls", limit=10, output_tokens=0, last_arguments='{"a": 1}') == (
        "tool_calls")
