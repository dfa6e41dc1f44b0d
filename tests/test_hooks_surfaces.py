"""One hooks configuration driving every surface: the interactive session in a real
pseudo-terminal (/hooks, trust, the status message while a hook runs, the refusal
shown), ACP (hook runs as tool calls with their decision) and ``exec`` (test_hooks_trust)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import spawn_agent_process, text_block
from agent_support import INTERPRETER, cli_env, provider_flags
from hooks_support import (
    PYTHON,
    acp_session,
    hooks_table,
    logged,
    merge,
    script,
    write_hooks,
)
from test_acp import RecordingClient
from test_tui import Terminal, start

from codemode_testkit.scripted_server import ScriptedModelServer

GUARD = """\
import json, sys, time
data = json.load(sys.stdin)
time.sleep(1.5)
if "rm " in data["tool_input"].get("command", ""):
    print("not in this repository", file=sys.stderr)
    sys.exit(2)
"""
END = """\
import json, os, sys
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(json.load(sys.stdin)) + "\\n")
"""
PROGRAM = ("try { await tools.shell({command: 'rm notes.txt'}) }\n"
           "catch (e) { console.log('caught: ' + e.message) }\n"
           "return 1")


@pytest.fixture
def terms() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


def configure(where: Path, tmp_path: Path) -> None:
    guard = script(tmp_path, "guard.py", GUARD)
    end = script(tmp_path, "end.py", END)
    write_hooks(where, merge(
        hooks_table("PreToolUse", f"{PYTHON} {guard}", "Bash",
                    statusMessage="asking the repository guard"),
        hooks_table("SessionEnd", f"{PYTHON} {end}"),
        hooks_table("SessionStart", f"{PYTHON} {end}")))


def test_the_interactive_session_reviews_trusts_and_shows_hooks(
    home: Path, work: Path, tmp_path: Path, terms: list[Terminal]
) -> None:
    log = tmp_path / "hook.log"
    configure(work / ".codemode" / "hooks.json", tmp_path)
    replies = [{"tool_calls": [{"name": "exec", "arguments": {"code": PROGRAM}}]},
               {"text": "The guard refused."}, {"text": "A fresh start."}]
    with ScriptedModelServer(replies) as server:
        term = start(terms, server, "--code-mode", home=home, cwd=work,
                     HOOK_LOG=str(log))
        term.expect("3 project hooks not trusted yet, so not run: review them with /hooks")
        term.prompt()
        term.send_line("/hooks")
        term.expect("[untrusted]")
        term.expect("PreToolUse [Bash]")
        term.expect("status: asking the repository guard")
        term.prompt()
        term.send_line("/hooks trust all")
        term.expect("trusted: PreToolUse")
        term.prompt()
        term.send_line("delete the notes")
        term.expect("asking the repository guard")  # while the guard runs
        term.expect("PreToolUse hook")
        term.expect("deny: not in this repository")
        term.expect("The guard refused.")
        term.prompt()
        term.send_line("/new")
        term.expect("session ")
        term.send_line("hello again")
        term.expect("A fresh start.")
        term.prompt()
        assert term.finish() == 0
    assert (work / "notes.txt").exists()
    seen = [(d["hook_event_name"], d.get("source") or d.get("reason")) for d in logged(log)]
    assert seen == [("SessionStart", "startup"), ("SessionEnd", "clear"),
                    ("SessionStart", "clear"), ("SessionEnd", "prompt_input_exit")]


async def test_acp_reports_hook_runs_as_tool_calls(home: Path, work: Path, tmp_path: Path) -> None:
    configure(home / "hooks.json", tmp_path)  # a user's hooks: trusted
    replies = [{"tool_calls": [{"name": "exec", "arguments": {"code": PROGRAM}}]},
               {"text": "refused"}]
    client = RecordingClient({}, [])
    with ScriptedModelServer(replies) as server:
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", "--code-mode",
            *provider_flags(server.base_url, "chat"),
            env=cli_env(home, HOOK_LOG=str(tmp_path / "hook.log")), cwd=work,
        ) as (conn, _process):
            sid = await acp_session(conn, work)
            result = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("go")]), 60)
    assert result.stop_reason == "end_turn"
    starts = [u for u in client.updates if u.session_update == "tool_call"
              and u.title.startswith("PreToolUse hook")]
    assert len(starts) == 1 and "asking the repository guard" in starts[0].title
    done = [u for u in client.updates if u.session_update == "tool_call_update"
            and u.tool_call_id == starts[0].tool_call_id]
    meta = done[-1].field_meta["codemode"]
    assert done[-1].status == "failed"
    assert meta["hook"]["decision"] == "deny"
    assert meta["hook"]["reason"] == "not in this repository"
    assert meta["parent_id"]  # the program whose call it hooked
    assert (work / "notes.txt").exists()
    program = json.dumps([u.model_dump(mode="json") for u in client.updates])
    assert "caught: tools.shell was denied by PreToolUse hook" in program
