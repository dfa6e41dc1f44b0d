"""Trust: a project's hooks run only once the person trusts them (recorded against the
exact definition, so a changed hook asks again); a user's own run; ``exec`` skips
untrusted ones with one notice, ``--trust-project-hooks`` runs them; ``interpreter hooks
list|trust|disable``; the Codex and Claude Code locations, opt-in; inline TOML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import provider_flags, run_cli
from confinement_support import give, run_shell, shared_dir, skip_unless
from hooks_support import hooks_table, script, write_hooks

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TRUST_FILE
from codemode_testkit.scripted_server import ScriptedModelServer

__all__ = ["shared_dir"]  # a fixture

PROGRAM = {"code": "const r = await tools.shell({command: 'echo hi'}); return r.output"}
SCRIPT = [{"tool_calls": [{"name": "exec", "arguments": PROGRAM}]}, {"text": "done"}]


def marker_hook(folder: Path, name: str, marker: Path) -> str:
    return str(script(folder, name, f"#!/bin/sh\necho ran >> {marker}\n"))


def exec_run(server: ScriptedModelServer, home: Path, work: Path, *extra: str):
    """``exec --json`` (notices are for people: ``--human`` in ``extra`` drops --json)."""
    json_flag = [] if "--human" in extra else ["--json"]
    extra = tuple(e for e in extra if e != "--human")
    return run_cli(["exec", *json_flag, "--code-mode", "--harness", "native",
                    *provider_flags(server.base_url, "chat"), *extra, "go"],
                   home=home, cwd=work)


def test_exec_skips_untrusted_project_hooks_until_trusted_and_asks_again_after_a_change(
    home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    hook = marker_hook(tmp_path, "mark.sh", marker)
    hooks_file = write_hooks(work / ".codemode" / "hooks.json",
                             hooks_table("PreToolUse", hook, "Bash"))
    with ScriptedModelServer(SCRIPT * 5) as server:
        first = exec_run(server, home, work, "--human")
        assert first.code == 0, first.stderr
        assert not marker.exists()
        assert first.stderr.count("not trusted yet") == 1
        assert "interpreter hooks trust" in first.stderr

        listed = run_cli(["hooks", "list", "--json"], home=home, cwd=work)
        rows = json.loads(listed.stdout)["hooks"]
        assert [(r["state"], r["scope"], r["source"]) for r in rows] == [
            ("untrusted", "project", str(hooks_file))]
        trusted = run_cli(["hooks", "trust", "1"], home=home, cwd=work)
        assert trusted.code == 0 and rows[0]["key"] in trusted.stdout
        assert (home / TRUST_FILE).exists()

        second = exec_run(server, home, work)
        assert second.code == 0 and marker.read_text() == "ran\n"
        assert "not trusted" not in second.stderr
        items = [e["item"] for e in second.events() if e["type"] == "item.completed"
                 and e["item"]["type"] == "hook_run"]
        assert [i["event"] for i in items] == ["PreToolUse"] and items[0]["status"] == "completed"

        # The same hook with a longer timeout is another definition: asked about again.
        write_hooks(hooks_file, hooks_table("PreToolUse", hook, "Bash", timeout=5))
        third = exec_run(server, home, work, "--human")
        assert third.code == 0 and marker.read_text() == "ran\n"
        assert "not trusted yet" in third.stderr

        # With --json the notice is on stderr too, once; stdout stays events only.
        as_json = exec_run(server, home, work)
        assert as_json.code == 0 and marker.read_text() == "ran\n"
        assert as_json.stderr.count("not trusted yet") == 1, as_json.stderr
        assert all(line.startswith("{") for line in as_json.stdout.splitlines())

        # An explicit flag runs them all.
        fourth = exec_run(server, home, work, "--trust-project-hooks")
        assert fourth.code == 0 and marker.read_text() == "ran\nran\n"


def test_user_hooks_run_and_can_be_disabled(home: Path, work: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write_hooks(home / "hooks.json",
                hooks_table("SessionStart", marker_hook(tmp_path, "m.sh", marker)))
    listed = json.loads(run_cli(["hooks", "list", "--json"], home=home, cwd=work).stdout)
    assert listed["hooks"][0]["state"] == "trusted"
    key = listed["hooks"][0]["key"]
    assert run_cli(["hooks", "disable", key[:6]], home=home, cwd=work).code == 0
    with ScriptedModelServer([{"text": "a"}, {"text": "b"}]) as server:
        exec_run(server, home, work)
        assert not marker.exists()
        assert run_cli(["hooks", "trust", key], home=home, cwd=work).code == 0
        exec_run(server, home, work)
        assert marker.exists()


def test_a_bad_name_is_a_usage_error_and_a_bad_file_a_listed_problem(
    home: Path, work: Path
) -> None:
    (work / ".codemode").mkdir()
    (work / ".codemode" / "hooks.json").write_text('{"hooks": {"PreToolUse": [')
    (home / "hooks.json").write_text(json.dumps({"hooks": {"BeforeEverything": [],
                                                           "Stop": [{"matcher": "(",
                                                                     "hooks": []}]}}))
    listed = run_cli(["hooks", "list"], home=home, cwd=work)
    assert listed.code == 1 and "Traceback" not in listed.stderr + listed.stdout
    assert "not valid JSON" in listed.stderr
    assert "unknown hook event 'BeforeEverything'" in listed.stderr
    assert "not a valid regular expression" in listed.stderr
    bad = run_cli(["hooks", "trust", "zzzz"], home=home, cwd=work)
    assert bad.code == 2 and "no hook 'zzzz'" in bad.stderr


@pytest.mark.parametrize("opt_in", [False, True])
def test_codex_and_claude_code_locations_are_read_when_opted_in(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opt_in: bool
) -> None:
    person = tmp_path / "person"
    monkeypatch.delenv("CODEX_HOME", raising=False)
    write_hooks(person / ".codex" / "hooks.json", hooks_table("Stop", "user-codex"))
    (person / ".claude").mkdir(parents=True)
    (person / ".claude" / "settings.json").write_text(json.dumps(
        {"permissions": {"allow": []}, "hooks": hooks_table("Stop", "user-claude")}))
    write_hooks(work / ".codex" / "hooks.json", hooks_table("PreToolUse", "proj-codex", "Bash"))
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": hooks_table("PostToolUse", "proj-claude", "Edit|Write")}))
    (work / ".claude" / "settings.local.json").write_text(json.dumps({"model": "x"}))
    found = discover(work, home, None, other_agents=opt_in, user_home=person)
    got = sorted((h.command, h.scope) for h in found.hooks)
    if not opt_in:
        assert got == []
    else:
        assert got == [("proj-claude", "project"), ("proj-codex", "project"),
                       ("user-claude", "user"), ("user-codex", "user")]
        assert found.problems == []


def test_inline_toml_hooks_in_config(home: Path, work: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = marker_hook(tmp_path, "m.sh", marker)
    (home / "config.toml").write_text(
        "[[hooks.PreToolUse]]\n"
        'matcher = "shell"\n'
        "[[hooks.PreToolUse.hooks]]\n"
        'type = "command"\n'
        f'command = "{hook}"\n'
        "timeout = 10\n"
        'statusMessage = "checking the command"\n')
    listed = json.loads(run_cli(["hooks", "list", "--json"], home=home, cwd=work).stdout)
    assert [(h["event"], h["matcher"], h["statusMessage"], h["timeout"], h["state"])
            for h in listed["hooks"]] == [
        ("PreToolUse", "shell", "checking the command", 10.0, "trusted")]
    with ScriptedModelServer(SCRIPT) as server:
        run = exec_run(server, home, work)
    assert run.code == 0 and marker.exists()
    started = [e["item"] for e in run.events() if e["type"] == "item.started"
               and e["item"]["type"] == "hook_run"]
    assert started[0]["status_message"] == "checking the command"


def test_merging_layers_runs_all_matching_hooks(home: Path, work: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PreToolUse", marker_hook(tmp_path, "b.sh", b), "Bash"))
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", marker_hook(tmp_path, "a.sh", a)))
    assert run_cli(["hooks", "trust", "all"], home=home, cwd=work).code == 0
    with ScriptedModelServer(SCRIPT) as server:
        run = exec_run(server, home, work)
    assert run.code == 0 and a.exists() and b.exists()


def test_a_listing_shows_escape_sequences_and_does_not_obey_them(home: Path, work: Path) -> None:
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("Stop", "echo \x1b]0;owned\x07 \x1b[2J", statusMessage="\x1b[31mred"))
    listed = run_cli(["hooks", "list"], home=home, cwd=work)
    assert listed.code == 0
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "echo" in listed.stdout


def test_a_confined_command_cannot_trust_or_plant_hooks(shared_dir: Path, user: str) -> None:
    """As root and as nobody: a command the agent runs writes neither the trust store
    (codemode's home, here inside the workspace, the worst case) nor a project's
    hooks file, though the workspace itself is writable to it."""
    skip_unless(user)
    ws = shared_dir / "ws"
    agent_home = ws / "agent-home"
    (ws / ".codemode").mkdir(parents=True)
    agent_home.mkdir()
    give(ws, user)
    attack = ("echo '{\"trusted\": {}}' > agent-home/hooks-trust.json; "
              "echo '{\"hooks\": {}}' > .codemode/hooks.json; "
              "echo '{\"hooks\": {}}' > agent-home/hooks.json; "
              "echo ok > allowed.txt; ls agent-home .codemode")
    result = run_shell(user, ws, attack, extra_env={"CODEMODE_HOME": str(agent_home)},
                       sandbox_mode="workspace-write")
    assert (ws / "allowed.txt").read_text() == "ok\n"  # the workspace is writable
    assert not (agent_home / "hooks-trust.json").exists(), result
    assert not (agent_home / "hooks.json").exists(), result
    assert not (ws / ".codemode" / "hooks.json").exists(), result
