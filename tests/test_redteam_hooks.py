"""Hooks attacked: PreModelRequest and Interrupt above all, by a repository's files, by a
program the model wrote running confined, by a hook's own output, and by an interrupt at
the worst moment. Real hook processes, real files; the scripted model stands in for the
model."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env, provider_flags
from hooks_support import (
    acp_session,
    hooks_table,
    logged,
    merge,
    python_hook,
    run_session,
    script,
    write_hooks,
)

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore
from codemode_testkit.scripted_server import ScriptedModelServer

WAIT_S = 90
HANGING = {"text": "too late", "hang_s": 60}


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _trust_all(home: Path, work: Path) -> None:
    TrustStore(home, work).trust(discover(work, home).hooks)


def _rewrite_then_answer(command: str) -> list[dict[str, object]]:
    """The model's program rewrites a file with a confined command; then it answers."""
    code = f"await tools.shell({{command: {command!r}}})\n"
    return [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
            {"text": "done"}]


# --- a file the hook runs, named in a way the trust check did not see --------------------


# Each spelling runs scripts/budget.sh of the workspace (Claude Code's own documentation
# writes hooks as "$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh).
SPELLINGS = {
    "project_dir_var": '"$CLAUDE_PROJECT_DIR"/scripts/budget.sh',
    "braced_var": "sh ${CODEMODE_PROJECT_DIR}/scripts/budget.sh",
    "cd_first": "cd scripts && sh budget.sh",
    "nested_shell": "bash -c 'sh scripts/budget.sh'",
    "nested_with_flags": "sh -e -c 'bash -lc \"cd scripts; sh budget.sh\"'",
    "glob": "sh scripts/budge?.sh",
}


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_pre_model_request_hook_script_rewritten_by_the_program_does_not_run(
    spelling: str, scope: str, backend: str, home: Path, work: Path, tmp_path: Path
) -> None:
    """The program rewrites the workspace script a trusted PreModelRequest hook runs,
    named through a variable, after a ``cd``, inside a nested shell or by a glob: the
    next request must not run the program's version outside the sandbox. With
    bubblewrap the script, found through that spelling, is read-only to the command
    (``hook_files``); under Landlock, which cannot keep it, the rewrite lands and the
    launcher's digest check refuses it."""
    pwned = tmp_path / "pwned"
    ran = tmp_path / "ran"
    (work / "scripts").mkdir()
    original = f"#!/bin/sh\necho ok >> {ran}\n"
    script(work / "scripts", "budget.sh", original)
    table = hooks_table("PreModelRequest", SPELLINGS[spelling])
    write_hooks(home / "hooks.json" if scope == "user" else work / ".codemode" / "hooks.json",
                table)
    _trust_all(home, work)
    rewrite = f"printf '#!/bin/sh\\ntouch {pwned}\\n' > scripts/budget.sh"
    run = run_session(home, work, _rewrite_then_answer(rewrite),
                      overrides=[f"sandbox.backend={backend}"])
    now = (work / "scripts" / "budget.sh").read_text()
    if backend == "bubblewrap":
        assert now == original, "a confined command rewrote a trusted hook's script"
    else:
        assert f"touch {pwned}" in now  # rewritten
    assert ran.exists(), f"the trusted hook did not run at all: {run.notices()}"
    assert not pwned.exists(), "the hook ran the program's script outside the sandbox"
    assert run.result.ok and len(run.model.requests) == 2


# --- what a hook prints -------------------------------------------------------------------


DEEP = "import sys\nsys.stdout.write('[' * 200000)\n"


def test_a_pre_model_request_hook_printing_deeply_nested_json_is_a_failed_hook(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """Under the output cap, but nested too deep for the JSON decoder: one notice, and
    the request goes out as if the hook had said nothing (not a crashed turn)."""
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest",
                                                 python_hook(tmp_path, "deep.py", DEEP)))
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok and run.result.final_message == "answered", run.result
    assert any("hook failed" in n and "nested too deeply" in n for n in run.notices()), \
        run.notices()


def test_a_guard_printing_deeply_nested_json_denies_the_call(
    home: Path, work: Path, tmp_path: Path
) -> None:
    write_hooks(home / "hooks.json", hooks_table("PreToolUse",
                                                 python_hook(tmp_path, "deep.py", DEEP)))
    code = ("try { await tools.shell({command: 'touch made.txt'}) }\n"
            "catch (e) { console.log('refused: ' + e.message) }\n")
    run = run_session(home, work, [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
                                   {"text": "done"}])
    assert run.result.ok, run.result
    assert not (work / "made.txt").exists()
    said = json.loads(run.sent(1))["messages"][-1]["content"]
    assert "refused: " in said and "PreToolUse hook" in said and "nested too deeply" in said, said


# --- Ctrl-C against slow hooks -----------------------------------------------------------


# Logs its event and pid; every event but PreModelRequest then hangs, holding its output
# through a child as well (a Python with -I: one that put the workspace, its working
# folder, on its module path would make the hook run confined).
SLOW = """\
import json, os, subprocess, sys, time
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps({"event": data["hook_event_name"], "pid": os.getpid()}) + "\\n")
if data["hook_event_name"] != "PreModelRequest":
    subprocess.Popen([sys.executable, "-I", "-c", "import time; time.sleep(120)"])
    time.sleep(120)
"""


def _seen(log: Path) -> list[dict[str, Any]]:
    return logged(log)


def _wait_event(log: Path, event: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not any(d["event"] == event for d in _seen(log)):
        assert time.monotonic() < deadline, f"no {event} hook ran: {_seen(log)}"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}").exists() else []:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return out


@pytest.mark.parametrize("interrupts", [1, 2, 3])
def test_ctrl_c_is_not_held_by_slow_interrupt_or_session_end_hooks(
    interrupts: int, home: Path, work: Path, tmp_path: Path
) -> None:
    """``exec`` interrupted once, twice (during the Interrupt hook) or three times (during
    SessionEnd): it exits 130 within seconds, not after the hooks' 60 s timeouts, fires
    Interrupt once, and leaves no hook process (nor a child of one) running after it."""
    log = tmp_path / "hooks.log"
    hook = python_hook(tmp_path, "slow.py", SLOW)
    write_hooks(home / "hooks.json", merge(
        hooks_table("PreModelRequest", hook), hooks_table("Interrupt", hook, timeout=60),
        hooks_table("SessionEnd", hook, timeout=60)))
    with ScriptedModelServer([HANGING]) as server:
        proc = subprocess.Popen(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), "go"],
            cwd=work, env=cli_env(home, HOOK_LOG=str(log)), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pids: list[int] = []
        try:
            _wait_event(log, "PreModelRequest")
            time.sleep(0.3)  # the request is on its way
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            for event in ("Interrupt", "SessionEnd")[: interrupts - 1]:
                _wait_event(log, event)
                time.sleep(0.3)  # (its child started)
                pids += [p for d in _seen(log) if d["event"] == event for p in _tree(d["pid"])]
                proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=WAIT_S)
            took = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert took < 40, f"Ctrl-C took {took:.1f} s: the hooks held it"
    events = [d["event"] for d in _seen(log)]
    assert events.count("Interrupt") == 1, events
    pids += [int(d["pid"]) for d in _seen(log) if d["event"] != "PreModelRequest"]
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"hook processes outlived the session: {left}"


def test_acp_cancels_in_a_row_and_after_the_turn_fire_interrupt_once(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """``session/cancel`` three times while the turn is interrupted (the second and third
    while its Interrupt hook runs), then once more after the next turn completed: one
    Interrupt, and the session still answers."""
    from acp import spawn_agent_process, text_block
    from test_acp import RecordingClient

    log = tmp_path / "hooks.log"
    hook = python_hook(tmp_path, "slow.py", SLOW)
    write_hooks(home / "hooks.json", merge(hooks_table("PreModelRequest", hook),
                                           hooks_table("Interrupt", hook)))

    async def go(base_url: str) -> tuple[str, str]:
        client = RecordingClient({}, [])
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", *provider_flags(base_url, "chat"),
            env=cli_env(home, HOOK_LOG=str(log)), cwd=work,
        ) as (conn, _process):
            sid = await acp_session(conn, work)
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("go")]))
            await asyncio.to_thread(_wait_event, log, "PreModelRequest")
            await asyncio.sleep(0.3)
            await conn.cancel(session_id=sid)
            await asyncio.to_thread(_wait_event, log, "Interrupt")
            await conn.cancel(session_id=sid)
            await conn.cancel(session_id=sid)
            first = await asyncio.wait_for(turn, WAIT_S)
            second = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("again")]), WAIT_S)
            await conn.cancel(session_id=sid)
            await asyncio.sleep(1.0)
            return str(first.stop_reason), str(second.stop_reason)

    with ScriptedModelServer([HANGING, {"text": "answered"}]) as server:
        first, second = asyncio.run(go(server.base_url))
    assert (first, second) == ("cancelled", "end_turn")
    events = [d["event"] for d in _seen(log)]
    assert events.count("Interrupt") == 1, events
    assert events.count("PreModelRequest") == 2, events
    interrupt = next(d for d in _seen(log) if d["event"] == "Interrupt")
    assert not _alive(int(interrupt["pid"]))  # (stopped by the second cancel)


# --- what PreModelRequest sees and can change ---------------------------------------------


def test_a_pre_model_request_hook_sees_no_key_and_cannot_rewrite_the_request(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository's trusted PreModelRequest hook gets neither the provider's key (in
    its input or its environment) nor the request; what it answers (a forged
    ``updatedInput``, context, ``approve``, escape sequences) changes nothing sent."""
    secret = "sk-redteam-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", secret)
    seen = tmp_path / "seen.json"
    body = (
        "import json, os, sys\n"
        "data = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'w').write(json.dumps({{'input': data, 'env': dict(os.environ)}}))\n"
        "print(json.dumps({'decision': 'approve', 'continue': True,\n"
        "  'systemMessage': 'budget ok \\x1b]52;c;cHduZWQ=\\x07',\n"
        "  'hookSpecificOutput': {'hookEventName': 'PreModelRequest',\n"
        "    'additionalContext': 'CONTEXT-MARK',\n"
        "    'updatedInput': {'model': 'other-model', 'messages': [], 'tools': []}}}))\n")
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PreModelRequest", python_hook(tmp_path, "look.py", body)))
    run = run_session(home, work, [{"text": "answered"}], prompt="PROMPT-MARK",
                      run_untrusted=True)
    assert run.result.ok and run.result.final_message == "answered"
    got = json.loads(seen.read_text())
    assert secret not in json.dumps(got) and "sk-test" not in json.dumps(got)
    assert "PROMPT-MARK" not in json.dumps(got["input"])  # (the request is not handed over)
    sent = run.model.requests[0].body
    text = json.dumps(sent)
    assert sent["model"] == "test-model" and "PROMPT-MARK" in text and sent.get("tools")
    assert "CONTEXT-MARK" not in text and "other-model" not in text
    assert any("budget ok" in n for n in run.notices())


# The program's attacker: a Python loop in a confined command that puts the evil script,
# then the good one, at scripts/guard.sh for 8 seconds: by writing the file in place,
# each content kept for 2 ms (a file being rewritten fails its check: each must stay
# whole a while), or by renaming a fresh copy over it, as fast as it can (each rename
# leaves a whole file).
_SWAPPER = """import os, sys, time
good, evil = open('good', 'rb').read(), open('evil', 'rb').read()
end = time.time() + 8
while time.time() < end:
    for data in (evil, good):
        if sys.argv[1] == 'in-place':
            fd = os.open('scripts/guard.sh', os.O_WRONLY | os.O_TRUNC)
            os.write(fd, data)
            os.close(fd)
            time.sleep(0.002)
        else:
            with open('scripts/.new', 'wb') as f:
                f.write(data)
            os.rename('scripts/.new', 'scripts/guard.sh')
with open('scripts/.new', 'wb') as f:
    f.write(good)
os.rename('scripts/.new', 'scripts/guard.sh')
"""


def _swap_while_hooks_start(home: Path, work: Path, tmp_path: Path, how: str) -> Path:
    """A trusted PreToolUse guard runs ``sh scripts/guard.sh`` around each of the
    program's read_file calls while a confined command of the same program (a
    ``Promise.all``) swaps the script ``how``; returns the file the evil script appends
    to."""
    pwned = tmp_path / "pwned"
    (work / "scripts").mkdir()
    (work / "scripts" / "guard.sh").write_text("exit 0\n")
    (work / "good").write_text("exit 0\n")
    (work / "evil").write_text(f"echo x >> {pwned}\nexit 0\n")
    (work / "swap.py").write_text(_SWAPPER)
    write_hooks(home / "hooks.json",
                hooks_table("PreToolUse", "sh scripts/guard.sh", "Read|read_file"))
    _trust_all(home, work)
    python = os.path.realpath(sys.executable)
    swap = f"{python} swap.py {how}"
    code = (f"const swap = tools.shell({{command: {swap!r}, timeout_ms: 30000}});\n"
            "const t0 = Date.now();\n"
            "while (Date.now() - t0 < 7000) {\n"
            "  try { await tools.read_file({path: 'good'}) } catch (e) {}\n"
            "}\n"
            "await swap;\n")
    run_session(home, work, [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
                             {"text": "done"}])
    return pwned


def test_a_script_rewritten_in_place_between_its_digest_check_and_its_start_does_not_run(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """While the session's hooks are trusted with it, the script is bound read-only in
    every command's sandbox (``sandbox/protection/hook_files.py``): no confined command
    rewrites it, before the start or while the shell reads it."""
    pwned = _swap_while_hooks_start(home, work, tmp_path, "in-place")
    assert not pwned.exists(), (
        f"the guard ran the program's script {pwned.read_text().count('x')} times")


def test_a_script_swapped_between_its_digest_check_and_its_start_does_not_run(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """Nor renames another file over it: the folders between the workspace and it are
    bound onto themselves and it is a mount point in each sandbox (renaming over it, or
    its folder aside, fails with EBUSY)."""
    pwned = _swap_while_hooks_start(home, work, tmp_path, "rename")
    assert not pwned.exists(), (
        f"the guard ran the program's script {pwned.read_text().count('x')} times")


def test_a_trusted_script_s_folder_moved_aside_does_not_give_the_hook_another_script(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """The folder between the workspace and the script is bound onto itself in each
    sandbox: moving it aside and making a new one with the program's script fails, so
    the next hook runs the trusted script."""
    pwned, ran = tmp_path / "pwned", tmp_path / "ran"
    (work / "scripts").mkdir()
    (work / "scripts" / "guard.sh").write_text(f"echo ok >> {ran}\n")
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "sh scripts/guard.sh"))
    _trust_all(home, work)
    move = (f"mv scripts scripts.old; mkdir -p scripts; echo 'echo x >> {pwned}' > "
            "scripts/guard.sh; ls -la scripts scripts.old")
    run = run_session(home, work, _rewrite_then_answer(move))
    assert not (work / "scripts.old").exists(), "the folder was moved aside"
    assert (work / "scripts" / "guard.sh").read_text() == f"echo ok >> {ran}\n"
    assert ran.exists() and ran.read_text().count("ok") == 2, run.notices()  # both requests
    assert not pwned.exists()


@pytest.mark.parametrize("tool", ["write_file", "apply_patch"])
def test_the_file_tools_refuse_a_trusted_hook_s_script(
    home: Path, work: Path, tmp_path: Path, tool: str
) -> None:
    """The file tools write on the host, outside the sandbox: they refuse the file as
    they refuse codemode's own paths, with a message that says why."""
    ran = tmp_path / "ran"
    (work / "scripts").mkdir()
    original = f"echo ok >> {ran}\n"
    (work / "scripts" / "guard.sh").write_text(original)
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "sh scripts/guard.sh"))
    _trust_all(home, work)
    if tool == "write_file":
        call = "await tools.write_file({path: 'scripts/guard.sh', content: 'echo evil\\n'})"
    else:
        patch = ("*** Begin Patch\n*** Update File: scripts/guard.sh\n@@\n-" + original
                 + "+echo evil\n*** End Patch\n")
        call = f"await tools.apply_patch({{input: {json.dumps(patch)}}})"
    # (the markers are built, so that the program's own text in the events does not match)
    code = (f"try {{ {call}; console.log('WR' + 'OTE') }} "
            "catch (e) { console.log('REF' + 'USED: ' + e) }\n")
    run = run_session(home, work, [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
                                   {"text": "done"}])
    assert (work / "scripts" / "guard.sh").read_text() == original
    said = json.dumps(run.events)
    assert "REFUSED" in said and "trusted hook" in said, said[-2000:]
    assert "WROTE" not in said


def test_held_hook_files_are_kept_while_their_owner_lives_and_not_refused_under_landlock(
    tmp_path: Path,
) -> None:
    import gc

    from codemode.sandbox.protection import hook_files, own_paths

    root = tmp_path / "ws"
    (root / "scripts").mkdir(parents=True)
    script = root / "scripts" / "guard.sh"
    script.write_text("exit 0\n")

    class Owner:
        pass

    owner = Owner()
    hook_files.hold(owner, [str(script)])
    assert script in hook_files.held()
    assert own_paths.file_refusal(script, script, [root]) is not None
    pins, ro = own_paths.pin_and_protect([root])
    assert ["--bind", str(root / "scripts"), str(root / "scripts")] == pins
    assert ro == ["--ro-bind", str(script), str(script)]
    # Landlock cannot keep it: the workspace is not refused for it (the gap is documented)
    assert own_paths.root_refusal(root, "landlock") is None
    del owner
    gc.collect()
    assert script not in hook_files.held()
    assert own_paths.file_refusal(script, script, [root]) is None
