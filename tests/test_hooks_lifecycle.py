"""Every hook event, fired by real hook scripts in a real session: SessionStart,
UserPromptSubmit, PreToolUse, PermissionRequest, PostToolUse, PreCompact, PostCompact,
Stop (blocking once: the agent goes on) and SessionEnd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hooks_support import (
    RECORDER,
    hooks_table,
    logged,
    merge,
    python_hook,
    run_session,
    script,
    write_hooks,
)

EVERY = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
         "PreCompact", "PostCompact", "Stop", "SessionEnd")


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    path = tmp_path / "hook.log"
    monkeypatch.setenv("HOOK_LOG", str(path))
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    return path


def record_every_event(home: Path, tmp_path: Path) -> None:
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(home / "hooks.json", merge(*(hooks_table(e, recorder) for e in EVERY)))


def test_the_session_events_in_order(home: Path, work: Path, tmp_path: Path, log: Path) -> None:
    record_every_event(home, tmp_path)
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "id": "x1",
                         "arguments": {"code": "await tools.read_file({path: 'notes.txt'})"}}]},
        {"text": "first answer"},
        {"text": "second answer"},
    ], prompts=["first prompt", "second prompt"])
    assert run.result.ok
    seen = logged(log)
    assert [d["hook_event_name"] for d in seen] == [
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
        "UserPromptSubmit", "Stop", "SessionEnd"]
    start, prompt, stop = seen[0], seen[1], seen[4]
    assert start["source"] == "startup"
    assert prompt["prompt"] == "first prompt"
    assert stop["last_assistant_message"] == "first answer" and stop["stop_hook_active"] is False
    assert seen[-1]["reason"] == "other"
    assert len({d["session_id"] for d in seen}) == 1 and seen[0]["session_id"]


def test_session_start_and_prompt_context_reach_the_model(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    start = script(tmp_path, "start.sh", "#!/bin/sh\necho 'the build command is make ci'\n")
    prompt = python_hook(tmp_path, "prompt.py", (
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'UserPromptSubmit',"
        " 'additionalContext': 'ticket ABC-1 is about: ' + d['prompt']}}))\n"))
    write_hooks(home / "hooks.json", merge(hooks_table("SessionStart", str(start), "startup"),
                                           hooks_table("UserPromptSubmit", prompt)))
    run = run_session(home, work, [{"text": "ok"}], prompt="fix the login")
    sent = run.sent(0)
    assert "the build command is make ci" in sent
    assert "ticket ABC-1 is about: fix the login" in sent
    assert sent.index("make ci") < sent.index("fix the login") < sent.index("ticket ABC-1")


def test_a_prompt_blocked_by_a_shell_hook_never_reaches_the_model(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    scanner = script(tmp_path, "scan.sh", (
        "#!/bin/sh\n"
        "if grep -q 'sk-live' ; then echo 'the prompt holds a secret key' >&2; exit 2; fi\n"))
    write_hooks(home / "hooks.json", hooks_table("UserPromptSubmit", str(scanner)))
    run = run_session(home, work, [{"text": "should not be asked"}],
                      prompt="use sk-live-1234 to deploy")
    assert not run.result.ok and run.result.stop_reason == "prompt_blocked"
    assert "the prompt holds a secret key" in run.result.error
    assert run.model.requests == []


STOP_ONCE = """\
import json, sys
d = json.load(sys.stdin)
if not d["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "the tests have not run: run them"}))
"""


def test_a_stop_hook_blocks_once_and_the_agent_continues(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    stop = python_hook(tmp_path, "stop.py", STOP_ONCE)
    write_hooks(home / "hooks.json", hooks_table("Stop", stop))
    run = run_session(home, work, [
        {"text": "all done"},
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "const r = await tools.shell({command: 'echo tests pass'});\n"
                    "return r.output"}}]},
        {"text": "tests pass, done"},
    ])
    assert run.result.ok and run.result.final_message == "tests pass, done"
    assert len(run.model.requests) == 3
    assert "the tests have not run: run them" in run.sent(1)
    stops = [h for h in run.items("hook_run") if h["event"] == "Stop"]
    assert [h["status"] for h in stops] == ["declined", "completed"]


def test_permission_request_hooks_decide_what_would_be_asked(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    decider = python_hook(tmp_path, "perm.py", (
        "import json, os, sys\n"
        "d = json.load(sys.stdin)\n"
        "open(os.environ['HOOK_LOG'], 'a').write(json.dumps(d) + '\\n')\n"
        "ok = 'allowed-word' in d['tool_input']['command']\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PermissionRequest',"
        " 'decision': {'behavior': 'allow' if ok else 'deny', 'message': 'not on my list'}}}))\n"))
    write_hooks(home / "hooks.json", hooks_table("PermissionRequest", decider, "Bash"))
    script(work, "tool.sh", "#!/bin/sh\necho \"$1\"\n")
    code = ("const a = await tools.shell({command: './tool.sh allowed-word'});\n"
            "console.log('A:' + a.output.trim());\n"
            "try { await tools.shell({command: './tool.sh other'}) }\n"
            "catch (e) { console.log('B:' + e.message) }")
    # untrusted: a command no rule allows needs approval; nobody else can give it here.
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "ok"}],
        approval_policy="untrusted")
    out = run.items("code_execution")[0]["output"]
    assert "A:allowed-word" in out
    assert "B:" in out and "denied by PermissionRequest hook" in out and "not on my list" in out
    asked = [d for d in logged(log) if d["hook_event_name"] == "PermissionRequest"]
    assert [d["tool_name"] for d in asked] == ["Bash", "Bash"]
    assert asked[0]["sequence"] == 1 and asked[1]["sequence"] == 2


def test_compaction_fires_pre_and_post_compact(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    record_every_event(home, tmp_path)
    big = "const r = await tools.shell({command: 'seq 1 3000'}); return r.output"
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": big}}]},
        {"tool_calls": [{"name": "exec", "arguments": {"code": big}}]},
        {"status": 400, "error_code": "context_length_exceeded"},
        {"text": "done"},
    ])
    assert run.result.ok, run.result.error
    names = [d["hook_event_name"] for d in logged(log)]
    at = names.index("PreCompact")
    assert names[at: at + 3] == ["PreCompact", "PostCompact", "SessionStart"]
    compact = logged(log)[at]
    assert compact["trigger"] == "auto"
    assert logged(log)[at + 2]["source"] == "compact"
    assert json.dumps(names).count("SessionStart") == 2


def test_a_manual_compaction_fires_its_hooks_with_trigger_manual(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    import asyncio

    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session
    from codemode.config import load_config
    from codemode.providers.catalog import ProviderInfo, open_provider
    from codemode_testkit.scripted.in_process import IN_PROCESS_BASE_URL, ScriptedTransport
    from codemode_testkit.scripted.script import ScriptedModel

    record_every_event(home, tmp_path)
    big = "const r = await tools.shell({command: 'seq 1 3000'}); return r.output"
    model = ScriptedModel([{"tool_calls": [{"name": "exec", "arguments": {"code": big}}]},
                           {"text": "done"}])
    provider = open_provider(ProviderInfo(name="scripted", base_url=IN_PROCESS_BASE_URL,
                                          wire_api="chat"),
                             api_key="sk-test", http_transport=ScriptedTransport(model))
    session = build_session(
        load_config(["model_provider=scripted"], home=home),
        SessionOptions(cwd=work, model="test-model", code_mode=True, harness="native",
                       approval_policy="never"),
        SessionSpec(provider=provider, provider_name="scripted", record=False))

    async def go() -> int:
        try:
            assert (await session.run_turn("go")).ok
            return await session.compact("manual", keep=0)  # what /compact does
        finally:
            await session.aclose()

    assert asyncio.run(go()) == 1
    fired = [(d["hook_event_name"], d.get("trigger") or d.get("source")) for d in logged(log)
             if d["hook_event_name"] in ("PreCompact", "PostCompact", "SessionStart")]
    assert fired == [("SessionStart", "startup"), ("PreCompact", "manual"),
                     ("PostCompact", "manual"), ("SessionStart", "compact")]
