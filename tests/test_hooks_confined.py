"""Hooks that run a project's own tool (``make``, ``npx``, ``uv run``, ``pytest``...) run
in the session's sandbox (``codemode.hooks.confined``): what the tool runs from the
workspace (a Makefile's recipes, ``node_modules``) could have been written by a
confined command, and it gets no more rights than one. Attacked by the program the
model wrote; and checked to still work as a hook: a formatter rewrites the workspace,
a guard's decision and exit status hold, a hanging or flooding one is stopped. Real
sessions, sandboxes and hook processes; the scripted model stands in for the model."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from hooks_support import hooks_table, run_session, write_hooks

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _trust_all(home: Path, work: Path) -> None:
    TrustStore(home, work).trust(discover(work, home).hooks)


def _program(code: str) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]


def _makefile(work: Path, recipes: dict[str, str]) -> None:
    (work / "Makefile").write_text(
        "".join(f"{target}:\n\t@{line}\n" for target, line in recipes.items()))


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_script_a_makefile_recipe_runs_rewritten_by_the_program_runs_confined(
    backend: str, home: Path, work: Path
) -> None:
    """The trusted hook is ``make -s fmt``; the Makefile is covered, the script its
    recipe starts cannot be. The program rewrites that script to write into codemode's
    home (which no command may): the next hook runs it in the sandbox, where it cannot."""
    pwned = home / "pwned"
    _makefile(work, {"fmt": "sh scripts/fmt.sh"})
    (work / "scripts").mkdir()
    (work / "scripts" / "fmt.sh").write_text("echo ok >> ran.txt\n")
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "make -s fmt"))
    _trust_all(home, work)
    run = run_session(home, work, _program(
        f"await tools.shell({{command: \"echo 'touch {pwned}; echo evil >> ran.txt' "
        "> scripts/fmt.sh\"})\n"), overrides=[f"sandbox.backend={backend}"])
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text() == "ok\nevil\n", run.notices()  # both ran
    assert not pwned.exists(), "a recipe of the trusted Makefile ran outside the sandbox"


def test_a_formatter_hook_still_rewrites_the_file_the_agent_wrote(
    home: Path, work: Path
) -> None:
    _makefile(work, {"fmt": "sed -i 's/TODO/DONE/' notes.txt"})
    write_hooks(home / "hooks.json", hooks_table("PostToolUse", "make -s fmt", "write_file"))
    _trust_all(home, work)
    run = run_session(home, work, _program(
        "await tools.write_file({path: 'notes.txt', content: 'TODO: x\\n'})\n"))
    assert run.result.ok, run.notices()
    assert (work / "notes.txt").read_text() == "DONE: x\n", run.notices()


@pytest.mark.parametrize("how", ["json", "exit_2"])
def test_a_confined_guards_decision_holds(how: str, home: Path, work: Path) -> None:
    """A PreToolUse guard run by ``make``: its JSON ``block`` on stdout, or exit status 2
    with the reason on stderr, denies the call, and the model is told the reason."""
    recipe = ("echo '{\"decision\": \"block\", \"reason\": \"GUARD-SAYS-NO\"}'" if how == "json"
              else "echo GUARD-SAYS-NO >&2; exit 2")
    _makefile(work, {"guard": recipe})
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", "make -s guard", "shell"))
    _trust_all(home, work)
    run = run_session(home, work, _program(
        "try { await tools.shell({command: 'touch made.txt'}) }\n"
        "catch (e) { console.log('refused: ' + e.message) }\n"))
    assert not (work / "made.txt").exists(), run.notices()
    said = json.dumps(run.model.requests[1].body["messages"][-1])
    assert "refused: " in said and "GUARD-SAYS-NO" in said, said


def test_a_confined_hook_that_hangs_is_stopped_with_what_it_started(
    home: Path, work: Path
) -> None:
    # (a duration of its own: other tests' hooks sleep 300 s beside this one)
    _makefile(work, {"slow": "(sleep 311.7 &) ; sleep 311.7"})
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "make -s slow", timeout=2))
    _trust_all(home, work)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok and run.result.final_message == "answered"
    assert any("timed out" in n for n in run.notices()), run.notices()
    deadline = time.monotonic() + 10  # (a killed process is gone a moment later)
    while (left := [p for p in os.listdir("/proc")
                    if p.isdigit() and _cmdline(p) == "sleep311.7"]) and (
            time.monotonic() < deadline):
        time.sleep(0.1)
    assert not left, "the confined hook's processes outlived it"


def test_a_confined_hook_that_floods_is_stopped(home: Path, work: Path) -> None:
    """Past the output cap it is stopped then, not at its time limit (60 s here)."""
    _makefile(work, {"loud": "yes x"})
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "make -s loud", timeout=60))
    _trust_all(home, work)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok and run.result.final_message == "answered"
    assert any("printed too much output" in n for n in run.notices()), run.notices()


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b"").decode()
    except OSError:
        return ""


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on this machine")
def test_a_node_script_named_by_its_path_runs_confined(home: Path, work: Path) -> None:
    """``./node_modules/.bin/fmt`` (a ``#!/usr/bin/env node`` script) is covered by its
    digest and its folder, not what it requires from ``node_modules``: the program
    rewrites that, and the hook, run by node, runs in the sandbox."""
    pwned = home / "pwned"
    bin_dir, lib = work / "node_modules" / ".bin", work / "node_modules" / "fmtlib"
    bin_dir.mkdir(parents=True)
    lib.mkdir()
    (bin_dir / "fmt").write_text("#!/usr/bin/env node\nrequire('../fmtlib/index.js');\n")
    (bin_dir / "fmt").chmod(0o755)
    (lib / "index.js").write_text(
        "require('fs').appendFileSync('ran.txt', 'ok\\n');\n")
    write_hooks(home / "hooks.json",
                hooks_table("PreModelRequest", "./node_modules/.bin/fmt"))
    _trust_all(home, work)
    evil = (f"require('fs').writeFileSync({json.dumps(str(pwned))}, 'x');\n"
            "require('fs').appendFileSync('ran.txt', 'evil\\n');\n")
    run = run_session(home, work, _program(
        f"await tools.write_file({{path: 'node_modules/fmtlib/index.js', "
        f"content: {json.dumps(evil)}}})\n"))
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text().startswith("ok\n"), run.notices()
    assert not pwned.exists(), "a trusted node script required the program's code outside"


def test_a_permission_hook_running_a_projects_tool_can_refuse_but_never_grant(
    home: Path, work: Path
) -> None:
    """A PermissionRequest hook ``make -s approve``: the Makefile's recipe is the
    workspace's, which the program can rewrite to approve whatever it asks. Run
    confined, the program still steers its answer: its "deny" holds, its "allow" is not
    taken (the call goes to the person; with nobody to ask, it is refused)."""
    answer = ("echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PermissionRequest\", "
              "\"decision\": {\"behavior\": \"%s\", \"message\": \"RECIPE-SAYS\"}}}'")
    (work / "tool.sh").write_text("#!/bin/sh\necho ran-$1\n")
    (work / "tool.sh").chmod(0o755)
    _makefile(work, {"approve": answer % "allow"})
    write_hooks(home / "hooks.json", hooks_table("PermissionRequest", "make -s approve", "Bash"))
    _trust_all(home, work)
    code = ("try { const a = await tools.shell({command: './tool.sh one'});"
            " console.log('A:' + a.output.trim()) }\n"
            "catch (e) { console.log('A-refused:' + e.message) }\n")
    # untrusted: a command no rule allows needs approval; nobody else can give it here.
    run = run_session(home, work, _program(code), approval_policy="untrusted")
    out = run.items("code_execution")[0]["output"]
    assert "A:ran-one" not in out and "A-refused:" in out, out
    _makefile(work, {"approve": answer % "deny"})
    _trust_all(home, work)
    run = run_session(home, work, _program(code), approval_policy="untrusted")
    out = run.items("code_execution")[0]["output"]
    assert "A-refused:" in out and "RECIPE-SAYS" in out, out
