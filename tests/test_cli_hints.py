"""Flags, help and typos across the commands: -C/--cd everywhere a workspace is taken,
suggestions only when they are close, help text on every option, policy check's exit
status, the workspace in `sessions`, and a failed piped turn that is not exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent_support import INTERPRETER, call, cli_env, provider_flags, run_cli, session_files
from test_tui import Terminal, start, terminals  # noqa: F401  (the fixture)

from codemode.terminal.hints import near_options, one_edit_apart
from codemode_testkit.scripted_server import ScriptedModelServer


def test_one_edit() -> None:
    assert one_edit_apart("sesions", "sessions") and one_edit_apart("modle", "model")
    assert one_edit_apart("exex", "exec") and not one_edit_apart("bogus", "jobs")
    assert near_options("--bogus", ["--jobs", "--verbose", "--json"]) == []
    assert near_options("--job", ["--jobs", "--json"]) == ["--jobs"]


def test_every_workspace_taking_command_takes_dash_c(tmp_path: Path, home: Path) -> None:
    (tmp_path / "w").mkdir()
    w = tmp_path / "w"
    (w / "a.txt").write_text("x\n")
    run = run_cli(["run", "-", "-C", str(w)], home=home, cwd=tmp_path,
                  stdin="return (await tools.read_file({path: 'a.txt'})).content")
    assert run.code == 0 and run.stdout == "x\n\n", run.stderr
    patch = "*** Begin Patch\n*** Add File: b.txt\n+new\n*** End Patch\n"
    applied = run_cli(["apply-patch", "--cd", str(w)], home=home, cwd=tmp_path, stdin=patch)
    assert applied.code == 0 and (w / "b.txt").read_text() == "new\n", applied.stderr
    checked = run_cli(["policy", "check", "-C", str(w), "ls"], home=home, cwd=tmp_path)
    assert checked.code == 0 and "decision: allow" in checked.stdout, checked.stderr


def test_option_suggestions_only_when_close(tmp_path: Path, home: Path) -> None:
    bogus = run_cli(["run", "--bogus", "x.js"], home=home, cwd=tmp_path)
    assert bogus.code == 2 and "No such option '--bogus'" in bogus.stderr
    assert "Did you mean" not in bogus.stderr, bogus.stderr
    near = run_cli(["run", "--job", "2", "x.js"], home=home, cwd=tmp_path)
    assert "Did you mean '--jobs'?" in near.stderr


def test_help_text_for_every_option_and_the_true_harness_default(
    tmp_path: Path, home: Path
) -> None:
    run_help = run_cli(["run", "--help"], home=home, cwd=tmp_path).stdout
    assert "--engine [quickjs|v8] quickjs: the quicker to start" in " ".join(run_help.split())
    assert "How many sessions" in run_cli(["sessions", "--help"], home=home, cwd=tmp_path).stdout
    exec_help = " ".join(run_cli(["exec", "--help"], home=home, cwd=tmp_path).stdout.split())
    exec_help = exec_help.replace("- ", "-")  # click breaks lines at hyphens
    assert "default: native" not in exec_help and "claude-code for Anthropic" in exec_help
    for flag in ("-C, --cwd, --cd DIRECTORY",):
        assert flag in run_help


def test_a_command_name_typo_is_not_sent_to_the_model(tmp_path: Path, home: Path) -> None:
    with ScriptedModelServer([{"text": "should not be asked"}]) as server:
        typo = run_cli([*provider_flags(server.base_url, "chat"), "sesions"], home=home,
                       cwd=tmp_path)
        assert server.requests == []
    assert typo.code == 2
    assert "did you mean `interpreter sessions`?" in typo.stderr
    assert session_files(home) == []


def test_policy_check_exit_status_says_the_decision(tmp_path: Path, home: Path) -> None:
    cases = {"ls": 0, "frobnicate-xyz": 10, "git push --force": 20, "rm -rf /": 30}
    for command, status in cases.items():
        checked = run_cli(["policy", "check", command], home=home, cwd=tmp_path)
        assert checked.code == status, (command, checked.stdout, checked.stderr)


def test_sessions_lists_the_workspace(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "done"}]) as server:
        ran = run_cli(["exec", *provider_flags(server.base_url, "chat"), "hi"], home=home,
                      cwd=work)
        assert ran.code == 0, ran.stderr
    listed = run_cli(["sessions"], home=home, cwd=work)
    [line] = listed.stdout.splitlines()
    assert str(work) in line and "hi" in line


def test_a_failed_piped_turn_exits_1(home: Path, work: Path) -> None:
    script = [{"status": 400, "error_message": "bad request on purpose"}]
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            [str(INTERPRETER), *provider_flags(server.base_url, "chat")],
            input="do it\n", capture_output=True, text=True, cwd=work, env=cli_env(home),
            timeout=60,
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad request on purpose" in proc.stdout + proc.stderr


def test_a_slash_command_typo_gets_a_suggestion(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    with ScriptedModelServer([{"tool_calls": [call("shell", {"command": "true"})]}]) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("/modle")
        term.expect("unknown command /modle (did you mean /model?)")
        term.prompt()
        assert term.finish() == 0
