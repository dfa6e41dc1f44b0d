"""Hooks from the attacker's side: trust covers the content of the workspace files a
hook's command names, a user's hooks file symlinked into a workspace is a project's, and
a hook stopped at its timeout takes what it started with ``setsid`` along."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless
from hooks_support import hooks_table, run_session, script, write_hooks
from test_hooks_containment import _alive

from codemode.hooks.discovery import discover
from codemode.hooks.process import run_command
from codemode.hooks.trust import TrustStore

__all__ = ["shared_dir"]  # a fixture


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _shell_then(command: str) -> list[dict[str, object]]:
    code = (f"try {{ await tools.shell({{command: {command!r}}}) }}\n"
            "catch (e) { console.log('refused: ' + e.message) }\n"
            "await tools.shell({command: 'echo second'})\n")
    return [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]


def _trust_all(home: Path, work: Path) -> None:
    try:
        store = TrustStore(home, work)
    except TypeError:  # (the store as it was before trust covered content)
        store = TrustStore(home)  # type: ignore[call-arg]
    store.trust(discover(work, home).hooks)


def test_a_trusted_project_hook_does_not_run_its_script_once_a_command_rewrote_it(
    home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    (work / "scripts").mkdir()
    (work / "scripts" / "fmt.sh").write_text(f"echo trusted >> {marker}\n")
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PostToolUse", "sh scripts/fmt.sh", "Bash|shell"))
    _trust_all(home, work)
    # Under Landlock, which cannot keep the file read-only, the command's rewrite lands
    # and the launcher's digest check is what stops it (with bubblewrap the rewrite
    # itself is refused: tests/test_redteam_hooks.py).
    rewrite = f"printf 'echo evil >> {marker}\\n' > scripts/fmt.sh"
    run = run_session(home, work, _shell_then(rewrite), overrides=["sandbox.backend=landlock"])
    assert (work / "scripts" / "fmt.sh").read_text().startswith("echo evil")  # it was written
    ran = marker.read_text() if marker.exists() else ""
    assert "evil" not in ran, "the hook ran what the command wrote"
    said = " ".join(run.notices()) + str(run.events)
    assert "fmt.sh" in said and "changed since it was trusted" in said, said


def test_a_script_an_unprivileged_confined_command_rewrote_is_not_run(
    shared_dir: Path, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root and as nobody: the command that rewrites the trusted hook's script runs
    confined (bubblewrap or Landlock, as that user); the next session does not run the
    hook, and one that started before the rewrite refuses it at its next start."""
    skip_unless(user)
    from codemode.hooks.engine import HookEngine, SessionFacts
    from codemode.hooks.loading import load_hooks

    ws, home = shared_dir / "ws", shared_dir / "codemode-home"
    (ws / "scripts").mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    marker = shared_dir / "evil-ran"
    (ws / "scripts" / "fmt.sh").write_text("exit 0\n")
    write_hooks(ws / ".codemode" / "hooks.json",
                hooks_table("PostToolUse", "sh scripts/fmt.sh", "Bash|shell"))
    _trust_all(home, ws)
    before = load_hooks(ws, home)  # a session started before the rewrite
    assert before.engine is not None and [h.command for h in before.engine.hooks] == [
        "sh scripts/fmt.sh"]
    give(ws, user)
    give(home, user)
    result = run_shell(user, ws, f"printf 'touch {marker}\\n' > scripts/fmt.sh",
                       sandbox_mode="workspace-write")
    assert "touch" in (ws / "scripts" / "fmt.sh").read_text(), result
    later = load_hooks(ws, home)
    assert later.engine is not None and later.engine.hooks == []
    assert any("fmt.sh" in n and "interpreter hooks trust" in n for n in later.notices), \
        later.notices
    fields = {"tool_name": "Bash", "tool_input": {"command": "x"}, "tool_response": {}}
    for engine in (before.engine, later.engine):
        asyncio.run(engine.fire("PostToolUse", fields, ("Bash", "shell")))
    assert not marker.exists(), "the rewritten script ran as a trusted hook"
    # The same check holds for an engine given no digests at all (as ToolHost may be).
    bare = HookEngine(before.engine.hooks, SessionFacts(cwd=ws))
    asyncio.run(bare.fire("PostToolUse", fields, ("Bash", "shell")))
    assert not marker.exists()


def test_a_users_guard_naming_a_workspace_script_holds_after_a_command_rewrote_it(
    home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "evil-ran"
    (work / "scripts").mkdir()
    guard = script(work / "scripts", "guard.sh",
                   "#!/bin/sh\necho '{\"decision\": \"block\", \"reason\": \"guarded\"}'\n")
    assert guard.exists()
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", "./scripts/guard.sh", "Bash|shell"))
    _trust_all(home, work)
    # The first call tries to rewrite the guard (were the guard to block it, nothing is
    # shown); the second must not be let through by a rewritten one.
    code = ("await tools.apply_patch({input: '*** Begin Patch\\n"
            "*** Update File: scripts/guard.sh\\n"
            "@@\\n-#!/bin/sh\\n+#!/bin/sh\\n+echo x >> " + str(marker) + "\\n*** End Patch\\n'})\n"
            "try { await tools.shell({command: 'touch made.txt'}) }\n"
            "catch (e) { console.log('refused: ' + e.message) }\n")
    run = run_session(home, work, [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
                                   {"text": "done"}])
    # the file tools refuse a file a trusted hook runs (``hook_files``)
    assert str(marker) not in (work / "scripts" / "guard.sh").read_text()
    assert not marker.exists(), "the rewritten guard ran"
    assert not (work / "made.txt").exists()  # the call was still denied
    assert "guard.sh" in str(run.events)


def test_a_user_hooks_file_symlinked_into_the_workspace_is_a_projects(
    home: Path, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "planted-ran"
    linked = work / "dotfiles" / "hooks.json"
    write_hooks(linked, {})
    (home / "hooks.json").symlink_to(linked)
    # A command of one session plants a hook in the file the user's hooks.json points to.
    plant = (f"printf '{{\"hooks\": {{\"SessionStart\": [{{\"hooks\": [{{\"type\": \"command\", "
             f"\"command\": \"touch {marker}\"}}]}}]}}}}' > dotfiles/hooks.json")
    run_session(home, work, _shell_then(plant))
    assert "SessionStart" in linked.read_text()
    # The next session must not run it as the user's own hook.
    later = run_session(home, work, [{"text": "ok"}])
    assert not marker.exists(), "a planted hook ran as the user's own"
    assert any("could have written" in n for n in later.notices()), later.notices()


def test_a_hook_stopped_at_its_timeout_takes_its_setsid_children_along(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hang = script(tmp_path, "hang.sh", (
        "#!/bin/sh\n"
        # a child in a session of its own, orphaned at once (its parent exits)
        f"setsid sh -c 'sleep 300 & echo $! > {pids}' &\n"
        "sleep 300\n"))
    done = asyncio.run(run_command(str(hang), b"{}", cwd=tmp_path, env=dict(os.environ),
                                   timeout_s=1.0))
    assert done.timed_out
    deadline = time.monotonic() + 10
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pids.read_text())
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, 9)
    assert not alive, "the setsid child outlived the hook's timeout"


def test_a_setsid_child_left_holding_a_hooks_output_is_stopped(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    leave = script(tmp_path, "leave.sh", (
        "#!/bin/sh\n"
        f"setsid sh -c 'sleep 300 & echo $! > {pids}' &\n"
        "sleep 0.3\necho '{}'\n"))
    started = time.monotonic()
    done = asyncio.run(run_command(str(leave), b"", cwd=tmp_path, env=dict(os.environ),
                                   timeout_s=120))
    assert done.exit_code == 0 and time.monotonic() - started < 30
    child = int(pids.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.kill(child, 9)
    assert not alive, "the setsid child holding the hook's output was left running"


def test_a_users_own_hook_naming_a_workspace_script_waits_for_trust(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """The user wrote the line, not the file: a program (of an earlier session) may have
    written scripts/start.sh, so it does not run until trusted with its content."""
    marker = tmp_path / "ran"
    (work / "scripts").mkdir()
    (work / "scripts" / "start.sh").write_text(f"touch {marker}\n")
    write_hooks(home / "hooks.json", hooks_table("SessionStart", "sh scripts/start.sh"))
    run = run_session(home, work, [{"text": "ok"}])
    assert not marker.exists()
    said = [n for n in run.notices() if "start.sh" in n]
    assert said and "never trusted" in said[0] and "interpreter hooks trust" in said[0], said
    _trust_all(home, work)
    run_session(home, work, [{"text": "ok"}])
    assert marker.exists()  # trusted with its content: it runs


def test_a_trusted_make_hook_stops_when_a_command_rewrites_the_makefile(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """No argument names the Makefile, but `make fmt` runs what it says: trusted with
    the hook, and a rewrite stops it like a named script's."""
    marker = tmp_path / "evil-ran"
    (work / "Makefile").write_text("fmt:\n\t@true\n")
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PostToolUse", "make -s fmt", "Bash|shell"))
    _trust_all(home, work)
    # Under Landlock, which cannot keep the file read-only, the command's rewrite lands
    # and the launcher's digest check is what stops it (with bubblewrap the rewrite
    # itself is refused: tests/test_redteam_hooks.py).
    rewrite = f"printf 'fmt:\\n\\ttouch {marker}\\n' > Makefile"
    run = run_session(home, work, _shell_then(rewrite), overrides=["sandbox.backend=landlock"])
    assert "touch" in (work / "Makefile").read_text()
    assert not marker.exists(), "the hook ran the Makefile a command wrote"
    assert "Makefile changed since it was trusted" in str(run.events)
