"""Hooks in the tool pipeline: every call a code-mode program makes is hooked, in order,
with its provenance; a guard's deny is a ToolError the program catches."""

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
    write_hooks,
)


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


GUARD = """\
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(data) + "\\n")
if "rm -rf" in data["tool_input"].get("command", ""):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "no recursive deletes here"}}))
"""

PROGRAM = """
try { await tools.shell({command: "rm -rf build"}); }
catch (e) { console.log("caught: " + e.message); }
const ok = await tools.shell({command: "echo fine"});
console.log(ok.output.trim());
"""


def test_a_deny_guard_is_hit_from_inside_a_program_and_caught_there(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "hook.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    guard = python_hook(tmp_path, "guard.py", GUARD)
    recorder = python_hook(tmp_path, "post.py", RECORDER)
    write_hooks(home / "hooks.json", merge(hooks_table("PreToolUse", guard, "Bash"),
                                           hooks_table("PostToolUse", recorder, "shell")))
    (work / "build").mkdir()
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "id": "x1", "arguments": {"code": PROGRAM}}]},
        {"text": "done"},
    ])
    assert run.result.ok
    assert (work / "build").is_dir()  # the denied call did not run
    program = run.items("code_execution")[0]
    assert "caught: tools.shell was denied by PreToolUse hook" in program["output"]
    assert "no recursive deletes here" in program["output"]
    assert str(tmp_path / "guard.py") in program["output"] and "fine" in program["output"]
    seen = logged(log)
    pre = [d for d in seen if d["hook_event_name"] == "PreToolUse"]
    post = [d for d in seen if d["hook_event_name"] == "PostToolUse"]
    # Both calls were seen by the guard, in the program's order, with provenance.
    assert [d["tool_input"]["command"] for d in pre] == ["rm -rf build", "echo fine"]
    assert [d["sequence"] for d in pre] == [1, 2]
    for d in pre:
        assert d["exec_call_id"] == "x1" and d["cell_id"] == "1"
        assert d["program_item_id"] == program["id"]
        assert (d["tool_name"], d["harness_tool_name"], d["canonical_tool_name"]) == (
            "Bash", "shell", "shell")
        assert d["cwd"] == str(work) and d["session_id"] and d["model"] == "test-model"
    # PostToolUse only for the call that ran, with its result.
    assert len(post) == 1 and post[0]["sequence"] == 2
    assert post[0]["tool_response"]["output"].strip() == "fine"
    # Each run is an item under the program.
    hook_items = run.items("hook_run")
    assert {h["event"] for h in hook_items} == {"PreToolUse", "PostToolUse"}
    assert all(h["parent_id"] == program["id"] for h in hook_items)
    assert [h["status"] for h in hook_items if h["event"] == "PreToolUse"].count("declined") == 1
    # The model saw the refusal as the program's output.
    assert "no recursive deletes here" in run.sent(1)


def test_post_tool_use_context_reaches_the_model_with_the_exec_result(
    home: Path, work: Path, tmp_path: Path
) -> None:
    hook = python_hook(tmp_path, "ctx.py", (
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PostToolUse',"
        " 'additionalContext': 'remember: ' + d['tool_input']['path']}}))\n"))
    write_hooks(home / "hooks.json", hooks_table("PostToolUse", hook, "Read"))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "id": "x1", "arguments": {
            "code": "const r = await tools.read_file({path: 'notes.txt'});\n"
                    "return r.total_lines"}}]},
        {"text": "done"},
    ])
    assert run.result.ok
    sent = run.sent(1)
    assert "remember: notes.txt" in sent and "PostToolUse hook on tools.read_file" in sent


def test_updated_input_is_validated_like_any_call(home: Path, work: Path, tmp_path: Path) -> None:
    rewrite = python_hook(tmp_path, "rewrite.py", (
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "cmd = d['tool_input']['command']\n"
        "new = {'command': 'echo rewritten'} if 'good' in cmd else {'nonsense': 1}\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'updatedInput': new}}))\n"))
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", rewrite, "shell"))
    code = ("const a = await tools.shell({command: 'echo good'});\n"
            "console.log(a.output.trim());\n"
            "try { await tools.shell({command: 'echo bad'}) }\n"
            "catch (e) { console.log('E:' + e.message) }")
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "ok"}])
    out = run.items("code_execution")[0]["output"]
    assert "rewritten" in out
    assert "E:" in out and "nonsense" in out  # the rewritten input failed validation


def test_no_matching_hook_is_not_run(home: Path, work: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "hook.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", recorder, "Edit|Write"))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "await tools.read_file({path: 'notes.txt'}); "
                    "await tools.write_file({path: 'out.txt', content: 'x'})"}}]},
        {"text": "ok"}])
    assert run.result.ok
    # Write matched (write_file's Claude Code name), Read did not.
    assert [d["canonical_tool_name"] for d in logged(log)] == ["write_file"]
    assert json.loads(json.dumps(run.items("hook_run")))[0]["event"] == "PreToolUse"


def test_a_program_cannot_trust_or_plant_hooks(home: Path, work: Path, tmp_path: Path) -> None:
    """The trust store and the project's hooks file are out of a program's reach: the
    workspace's .codemode/ is read-only to every tool and command, and codemode's home
    (here inside the workspace, the worst case) is protected in it."""
    inner_home = work / "agent-home"
    inner_home.mkdir()
    planted = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    code = f"""
const out = [];
for (const path of [".codemode/hooks.json", "agent-home/hooks-trust.json",
                    "agent-home/hooks.json"]) {{
  try {{ await tools.write_file({{path, content: {json.dumps(json.dumps(planted))}}});
         out.push("wrote " + path); }}
  catch (e) {{ out.push("refused " + path); }}
}}
const r = await tools.shell({{command:
  "mkdir -p .codemode; echo x > .codemode/hooks.json; echo x > agent-home/hooks-trust.json"}});
out.push("shell exit " + r.exit_code);
return out;
"""
    run = run_session(inner_home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "ok"}])
    value = run.items("code_execution")[0]["value"]
    assert value[:3] == ["refused .codemode/hooks.json", "refused agent-home/hooks-trust.json",
                         "refused agent-home/hooks.json"], value
    assert value[3] != "shell exit 0"
    assert not (work / ".codemode" / "hooks.json").exists()
    assert not (inner_home / "hooks-trust.json").exists()
    assert not (inner_home / "hooks.json").exists()


def test_ask_goes_to_the_approver_and_is_refused_without_one(
    home: Path, work: Path, tmp_path: Path
) -> None:
    import asyncio

    from codemode.hooks.loading import program_hooks
    from codemode.host import ToolHost

    asker = python_hook(tmp_path, "ask.py", (
        "import json\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'permissionDecision': 'ask', 'permissionDecisionReason': 'writes need a look'}}))\n"))
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", asker, "Write"))
    asked: list[str] = []

    async def approver(request: object) -> str:
        asked.append(getattr(request, "justification", ""))
        return "once" if len(asked) == 1 else "deny"

    code = """
const out = [];
for (const name of ["a.txt", "b.txt"]) {
  try { await tools.write_file({path: name, content: "x"}); out.push("wrote " + name); }
  catch (e) { out.push(e.message); }
}
return out;
"""

    async def go(with_approver: bool) -> object:
        host = ToolHost(work, hooks=program_hooks(work).engine,
                        sandbox={"sandbox_mode": "workspace-write"},
                        approver=approver if with_approver else None)
        try:
            return (await host.execute(code)).value
        finally:
            host.close()

    value = asyncio.run(go(True))
    assert value[0] == "wrote a.txt" and "declined" in value[1]
    assert len(asked) == 2 and "writes need a look" in asked[0]
    refused = asyncio.run(go(False))
    assert all("no one can approve it" in v for v in refused)


def test_continue_false_stops_the_turn(home: Path, work: Path, tmp_path: Path) -> None:
    stopper = python_hook(tmp_path, "stop.py", (
        "import json\n"
        "print(json.dumps({'continue': False, 'stopReason': 'budget exhausted'}))\n"))
    write_hooks(home / "hooks.json", hooks_table("PostToolUse", stopper))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "await tools.read_file({path: 'notes.txt'})"}}]},
        {"text": "never asked"}])
    assert not run.result.ok and run.result.stop_reason == "hook_stopped"
    assert "budget exhausted" in run.result.error
    assert len(run.model.requests) == 1


def test_matchers_see_an_emulated_harness_tool_and_ours(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "hook.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    write_hooks(home / "hooks.json",
                hooks_table("PreToolUse", python_hook(tmp_path, "rec.py", RECORDER), "shell"))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "Bash", "id": "c1", "arguments": {"command": "echo via-bash"}}]},
        {"text": "ok"}], harness="claude-code", code_mode=False)
    assert run.result.ok
    seen = logged(log)
    assert len(seen) == 1  # the adapter's own call of our shell is not hooked twice
    assert (seen[0]["tool_name"], seen[0]["harness_tool_name"], seen[0]["canonical_tool_name"],
            seen[0]["tool_use_id"]) == ("Bash", "Bash", "shell", "c1")
    assert "exec_call_id" not in seen[0]  # a classic call: no program


def test_mcp_tools_are_matched_by_their_mcp_names(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    probe = Path(__file__).parent / "mcp_servers" / "probe_server.py"
    log = tmp_path / "hook.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    (home / "config.toml").write_text(
        f"[mcp_servers.probe]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(probe))}]\ntrust = \"read\"\n"
        "startup_timeout_s = 120\n")  # (a busy machine starts it slowly)
    write_hooks(home / "hooks.json", hooks_table(
        "PostToolUse", python_hook(tmp_path, "rec.py", RECORDER), "mcp__probe__.*"))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "const s = await tools.probe.add({a: 2, b: 3}); "
                    "await tools.read_file({path: 'notes.txt'}); return s"}}]},
        {"text": "ok"}])
    assert run.result.ok, run.result.error
    seen = logged(log)
    assert [d["tool_name"] for d in seen] == ["mcp__probe__add"], (
        run.items("code_execution"), run.items("hook_run"), run.notices())
    assert seen[0]["tool_input"] == {"a": 2, "b": 3} and seen[0]["sequence"] == 1
