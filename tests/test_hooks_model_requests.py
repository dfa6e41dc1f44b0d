"""PreModelRequest and Interrupt, Codex's two events beyond the nine: fired from every
entry point that makes model requests or can be interrupted (the interactive session,
``exec``, ``resume``, ACP, eval's agent runs, batch agent workers), in the shape Codex
0.169 and 0.171 give them (recorded in tests/data/codex-hooks/), with what their
answers do."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process, text_block
from agent_support import INTERPRETER, cli_env, provider_flags
from hooks_support import (
    PYTHON,
    RECORDER,
    acp_session,
    hooks_table,
    logged,
    merge,
    python_hook,
    run_session,
    script,
    write_hooks,
)
from test_acp import RecordingClient
from test_tui import Terminal, start

from codemode_testkit.scripted_server import ScriptedModelServer

RECORDED = Path(__file__).parent / "data" / "codex-hooks"
CODEX_VERSIONS = ("0.169.0", "0.171.0")
# A model request that is still unanswered when the entry point is interrupted.
HANGING = {"text": "too late", "hang_s": 60}
WAIT_S = 90


def codex_payload(version: str, event: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"codex-{version}.json").read_text())
    return data[event]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "hook.log"


def record(home: Path, tmp_path: Path, *events: str) -> None:
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(home / "hooks.json", merge(*(hooks_table(e, recorder) for e in events)))


def wait_for(log: Path, event: str, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        seen = [d for d in logged(log) if d["hook_event_name"] == event]
        if len(seen) >= count:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"no {event} hook ran ({count} wanted); the log: {logged(log)}")


def _until_received(server: ScriptedModelServer, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(server.requests) < count:
        assert time.monotonic() < deadline, f"the model server got {len(server.requests)} requests"
        time.sleep(0.02)


@pytest.fixture
def terms() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


# --- one driver per entry point: make a request that hangs, interrupt it -------------------


def _interrupt_process(argv: list[str], home: Path, cwd: Path, log: Path, requests: int,
                       **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [str(INTERPRETER), *argv], cwd=cwd, env=cli_env(home, HOOK_LOG=str(log), **env),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(log, "PreModelRequest", requests)
        time.sleep(0.2)  # the request is on its way
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def drive_exec(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    with ScriptedModelServer([HANGING]) as server:
        done = _interrupt_process(["exec", *provider_flags(server.base_url, "chat"), "go"],
                                  home, work, log, 1)
    assert done.returncode == 130, done.stderr


def drive_resume(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    with ScriptedModelServer([{"text": "first answer"}, HANGING]) as server:
        flags = provider_flags(server.base_url, "chat")
        first = subprocess.run([str(INTERPRETER), "exec", *flags, "first"], cwd=work,
                               env=cli_env(home, HOOK_LOG=str(log)), capture_output=True,
                               text=True, timeout=WAIT_S)
        assert first.returncode == 0, first.stderr
        done = _interrupt_process(["resume", "--last", *flags, "second"], home, work, log, 2)
    assert done.returncode == 130, done.stderr


def drive_interactive(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    with ScriptedModelServer([HANGING, {"text": "after the interrupt"}]) as server:
        term = start(terms, server, home=home, cwd=work, HOOK_LOG=str(log))
        term.prompt()
        term.send_line("go")
        wait_for(log, "PreModelRequest")
        # Interrupted once the server has the request, so that the hanging answer is
        # its: 0.2 s after the hook logged was not always enough (under a CI run the
        # request reached the server 0.57 s after), and the next turn's request then
        # got the hanging answer instead.
        _until_received(server, 1)
        term.child.sendintr()
        wait_for(log, "Interrupt")
        term.prompt()
        term.send_line("again")
        term.expect("after the interrupt")
        term.prompt()
        assert term.finish() == 0


def drive_acp(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    async def go(base_url: str) -> str:
        client = RecordingClient({}, [])
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", *provider_flags(base_url, "chat"),
            env=cli_env(home, HOOK_LOG=str(log)), cwd=work,
        ) as (conn, _process):
            sid = await acp_session(conn, work)
            turn = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("go")]))
            await asyncio.to_thread(wait_for, log, "PreModelRequest")
            await asyncio.sleep(0.2)
            await conn.cancel(session_id=sid)
            result = await asyncio.wait_for(turn, WAIT_S)
            return str(result.stop_reason)

    with ScriptedModelServer([HANGING]) as server:
        assert asyncio.run(go(server.base_url)) == "cancelled"


def drive_eval(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    with ScriptedModelServer(lambda request: HANGING) as server:
        done = _interrupt_process(
            ["eval", *provider_flags(server.base_url, "chat"), "--task", "fix_failing_test",
             "--harness", "minimal", "--report", str(work / "report.json")],
            home, work, log, 1)
    assert done.returncode == 130, done.stderr


def drive_batch(home: Path, work: Path, log: Path, terms: list[Terminal]) -> None:
    repo = work / "repos" / "one"
    repo.mkdir(parents=True)
    (repo / "name.txt").write_text("one\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    with ScriptedModelServer(lambda request: HANGING) as server:
        done = _interrupt_process(
            ["exec", *provider_flags(server.base_url, "chat"), "--repos", "repos",
             "--report", "r.jsonl", "edit it"], home, work, log, 1)
    assert done.returncode == 130, done.stderr


def test_a_batch_repository_whose_token_budget_is_spent_fires_interrupt(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    record(home, tmp_path, "PreModelRequest", "Interrupt")
    repo = work / "repos" / "chatty"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    again = {"tool_calls": [{"name": "exec", "arguments": {"code": "console.log('more')"}}]}
    with ScriptedModelServer(lambda request: again) as server:
        done = subprocess.run(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), "--repos",
             "repos", "--report", "r.jsonl", "--token-budget", "3000", "go on"],
            cwd=work, env=cli_env(home, HOOK_LOG=str(log)), capture_output=True, text=True,
            timeout=WAIT_S)
    report = (work / "r.jsonl").read_text()
    assert done.returncode == 1 and "token budget spent" in report, done.stderr
    interrupts = wait_for(log, "Interrupt")
    assert len(interrupts) == 1
    assert interrupts[0]["turn_id"] == wait_for(log, "PreModelRequest")[-1]["turn_id"]


DRIVERS: dict[str, Callable[[Path, Path, Path, list[Terminal]], None]] = {
    "interactive": drive_interactive, "exec": drive_exec, "resume": drive_resume,
    "acp": drive_acp, "eval": drive_eval, "batch": drive_batch,
}


@pytest.mark.parametrize("entry", list(DRIVERS))
def test_every_entry_point_fires_both_events(
    entry: str, home: Path, work: Path, tmp_path: Path, log: Path, terms: list[Terminal]
) -> None:
    record(home, tmp_path, "PreModelRequest", "Interrupt")
    DRIVERS[entry](home, work, log, terms)
    wait_for(log, "Interrupt")
    seen = logged(log)
    requests = [d for d in seen if d["hook_event_name"] == "PreModelRequest"]
    interrupts = [d for d in seen if d["hook_event_name"] == "Interrupt"]
    assert len(interrupts) == 1
    interrupt = interrupts[0]
    # The request made just before the interrupt (the interactive session goes on after).
    last = [d for d in seen[: seen.index(interrupt)] if d in requests][-1]
    # The interrupted turn is the one whose request was hanging.
    assert interrupt["turn_id"] == last["turn_id"] and last["turn_id"]
    assert interrupt["session_id"] == last["session_id"] == last["thread_id"]
    assert last["kind"] == "sampling" and last["attempt_number"] == 1
    if entry == "resume":  # the resumed session's requests: one session, two turns
        assert requests[0]["session_id"] == last["session_id"]
        assert requests[0]["turn_id"] != last["turn_id"]


# --- the shape: every field Codex gives -----------------------------------------------------


def _shape(value: Any) -> str:
    return "null" if value is None else type(value).__name__


@pytest.mark.parametrize("version", CODEX_VERSIONS)
def test_our_payloads_have_every_field_codex_gives_them(
    version: str, home: Path, work: Path, tmp_path: Path, log: Path, terms: list[Terminal]
) -> None:
    record(home, tmp_path, "PreModelRequest", "Interrupt")
    drive_exec(home, work, log, terms)
    ours = {"PreModelRequest": wait_for(log, "PreModelRequest")[0],
            "Interrupt": wait_for(log, "Interrupt")[0]}
    for event, mine in ours.items():
        theirs = codex_payload(version, event)
        missing = sorted(set(theirs) - set(mine))
        assert not missing, f"{event}: Codex {version} gives {missing}, we do not"
        for key, value in theirs.items():
            if key == "transcript_path":  # a path, or null when the session is not recorded
                assert mine[key] is None or isinstance(mine[key], str)
            else:
                assert _shape(mine[key]) == _shape(value), (event, key, mine[key], value)
        assert mine["hook_event_name"] == event
        assert mine["cwd"] == str(work)


# --- what their answers do ------------------------------------------------------------------


def test_pre_model_request_fires_before_every_request(
    home: Path, work: Path, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_LOG", str(log))
    record(home, tmp_path, "PreModelRequest", "PreToolUse", "Stop")
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "id": "x1",
                         "arguments": {"code": "await tools.read_file({path: 'notes.txt'})"}}]},
        {"text": "first answer"},
        {"text": "second answer"},
    ], prompts=["first prompt", "second prompt"])
    assert run.result.ok
    seen = logged(log)
    assert [d["hook_event_name"] for d in seen] == [
        "PreModelRequest", "PreToolUse", "PreModelRequest", "Stop", "PreModelRequest", "Stop"]
    requests = [d for d in seen if d["hook_event_name"] == "PreModelRequest"]
    assert len({d["request_id"] for d in requests}) == 3
    assert requests[0]["turn_id"] == requests[1]["turn_id"] != requests[2]["turn_id"]
    assert len(run.model.requests) == 3


@pytest.mark.parametrize("answer", ["exit2", "block", "stop"])
def test_a_pre_model_request_hook_can_end_the_turn_before_the_request(
    answer: str, home: Path, work: Path, tmp_path: Path, log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = {
        "exit2": "import sys\nprint('over the budget for today', file=sys.stderr)\nsys.exit(2)\n",
        "block": ("import json\nprint(json.dumps({'decision': 'block',"
                  " 'reason': 'over the budget for today'}))\n"),
        "stop": ("import json\nprint(json.dumps({'continue': False,"
                 " 'stopReason': 'over the budget for today'}))\n"),
    }[answer]
    guard = python_hook(tmp_path, "budget.py", body)
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", guard))
    run = run_session(home, work, [{"text": "should not be asked"}])
    assert not run.result.ok
    assert len(run.model.requests) == 0
    assert "over the budget for today" in (run.result.error or "")
    assert run.result.stop_reason == "hook_stopped"


def test_other_answers_change_no_request(
    home: Path, work: Path, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Codex reads neither context nor plain text from PreModelRequest (0.169, 0.171);
    # a hook that fails leaves the request alone, with a notice.
    context = python_hook(tmp_path, "ctx.py", (
        "import json\nprint(json.dumps({'hookSpecificOutput': {'hookEventName':"
        " 'PreModelRequest', 'additionalContext': 'CONTEXT-MARK'}}))\n"))
    text = script(tmp_path, "text.sh", "#!/bin/sh\necho TEXT-MARK\n")
    broken = script(tmp_path, "broken.sh", "#!/bin/sh\necho broken >&2\nexit 1\n")
    write_hooks(home / "hooks.json", merge(
        hooks_table("PreModelRequest", context), hooks_table("PreModelRequest", str(text)),
        hooks_table("PreModelRequest", str(broken))))
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok and run.result.final_message == "answered"
    sent = run.sent(0)
    assert "CONTEXT-MARK" not in sent and "TEXT-MARK" not in sent
    assert any("hook failed" in n and "broken" in n for n in run.notices())


def test_an_interrupt_hook_speaks_to_the_person_and_cannot_hold_the_interrupt(
    home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    # It says something, then hangs: Codex clamps an Interrupt hook to 3 s, so do we.
    slow = python_hook(tmp_path, "slow.py", (
        "import json, sys, time\n"
        "print(json.dumps({'systemMessage': 'the build cache was kept'}), flush=True)\n"
        "time.sleep(60)\n"))
    speak = python_hook(tmp_path, "speak.py", (
        "import json\nprint(json.dumps({'systemMessage': 'turn stopped; notes saved'\n"
        "                                  '\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J'}))\n"))
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(home / "hooks.json", merge(
        hooks_table("PreModelRequest", recorder),
        hooks_table("Interrupt", slow, timeout=60),
        hooks_table("Interrupt", speak, "nomatch")))  # (Codex looks at no matcher here)
    with ScriptedModelServer([HANGING]) as server:
        started = time.monotonic()
        done = _interrupt_process(["exec", *provider_flags(server.base_url, "chat"), "go"],
                                  home, work, log, 1)
        took = time.monotonic() - started
    assert done.returncode == 130, done.stderr
    assert "hook: turn stopped; notes saved" in done.stderr
    assert "Traceback" not in done.stderr
    assert "\x1b" not in done.stderr  # (no clipboard write, no cleared screen)
    assert took < 30, f"the interrupt took {took:.1f} s"


def test_a_matcher_does_not_narrow_them(
    home: Path, work: Path, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Codex 0.169 and 0.171 ran a PreModelRequest hook whose matcher names nothing; an
    # event without a subject has nothing to match, so every group of it matches.
    monkeypatch.setenv("HOOK_LOG", str(log))
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(home / "hooks.json", merge(
        hooks_table("PreModelRequest", recorder, "nomatch"),
        hooks_table("UserPromptSubmit", recorder, "nomatch")))
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok
    assert [d["hook_event_name"] for d in logged(log)] == ["UserPromptSubmit",
                                                           "PreModelRequest"]


# --- the same trust as every other event ---------------------------------------------------


@pytest.mark.parametrize("trusted", [False, True])
def test_a_repositorys_hooks_for_them_wait_for_trust(
    trusted: bool, home: Path, work: Path, tmp_path: Path, log: Path
) -> None:
    recorder = python_hook(tmp_path, "rec.py", RECORDER)
    write_hooks(work / ".codemode" / "hooks.json", merge(
        hooks_table("PreModelRequest", recorder), hooks_table("Interrupt", recorder)))
    flags = ["--trust-project-hooks"] if trusted else []
    with ScriptedModelServer([{"text": "answered"}]) as server:
        done = subprocess.run(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), *flags, "go"],
            cwd=work, env=cli_env(home, HOOK_LOG=str(log)), capture_output=True, text=True,
            timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    events = [d["hook_event_name"] for d in logged(log)]
    if trusted:
        assert events == ["PreModelRequest"]
    else:
        assert events == []
        assert "2 project hooks not trusted yet, so not run" in done.stderr
    assert "unknown hook event" not in done.stderr


def test_a_program_that_rewrites_the_script_a_hook_names_does_not_get_it_run(
    home: Path, work: Path, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attacker is the model's program: between two requests it rewrites the
    # workspace script a (trusted) PreModelRequest hook runs, hoping the host runs its
    # version, unconfined, before the next request.
    monkeypatch.setenv("HOOK_LOG", str(log))
    (work / "scripts").mkdir()
    budget = script(work / "scripts", "budget.sh",
                    f"#!/bin/sh\ncat >> {log}\necho >> {log}\n")
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PreModelRequest", "sh scripts/budget.sh"))
    pwned = tmp_path / "pwned"
    program = ("await tools.shell({command: "
               f"'printf \"#!/bin/sh\\\\ntouch {pwned}\\\\n\" > scripts/budget.sh'}})")
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": program}}]},
        {"text": "done"},
    ], run_untrusted=True, overrides=["sandbox.backend=landlock"])
    # (under Landlock, which cannot keep the script read-only as bubblewrap does, the
    # rewrite lands: the launcher's digest check is what stops it)
    assert run.result.ok
    assert f"touch {pwned}" in budget.read_text()  # the program did rewrite it
    assert [d["hook_event_name"] for d in logged(log)] == ["PreModelRequest"]  # the first
    assert not pwned.exists()
    assert any("PreModelRequest" in n and "not run until it is trusted again" in n
               for n in run.notices()), run.notices()
    assert len(run.model.requests) == 2  # a hook that cannot run leaves the request alone


def test_the_recorded_payloads_are_small_and_anonymous() -> None:
    for version in CODEX_VERSIONS:
        text = (RECORDED / f"codex-{version}.json").read_text()
        assert len(text) < 4096
        assert "/root" not in text and "/home/" not in text and "/tmp" not in text
    assert PYTHON  # (the recorder hooks run with the test's own Python)
