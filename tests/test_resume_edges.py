"""Resuming what is unusual to resume: a replayed session (its "model" was a
recording) goes on with a live provider, or says how to give one; and the preview of a
resumed session shows what the user typed, not the session's own notes."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_support import call, provider_flags, run_cli, session_files
from test_tui import Terminal, start, terminals  # noqa: F401  (the fixture)

from codemode_testkit.scripted_server import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_replayed_session_resumes_with_a_live_provider(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "bugfix"
    shutil.copytree(EXAMPLES / "bugfix-repo", repo)
    replay = run_cli(["exec", "--replay", str(EXAMPLES / "sessions/fix-failing-test.jsonl"),
                      "-C", str(repo)], home=home, cwd=repo)
    assert replay.code == 0, replay.stderr
    # No provider configured: a clear usage error, not "unknown provider 'replay'".
    alone = run_cli(["resume", "--last", "and now?"], home=home, cwd=repo)
    assert alone.code == 2
    assert "replay of a recording" in alone.stderr and "--provider" in alone.stderr
    assert "unknown provider" not in alone.stderr
    with ScriptedModelServer([{"text": "continuing live"}]) as server:
        live = run_cli(["resume", "--last", *provider_flags(server.base_url, "chat"),
                        "and now?"], home=home, cwd=repo)
        assert live.code == 0, live.stderr
        assert "continuing live" in live.stdout
        body = server.requests[0].body
    assert body["model"] == "test-model"
    sent = str(body["messages"])
    assert "The test suite of this repository fails" in sent  # the replayed conversation
    assert len(session_files(home)) == 1  # the same session file, continued


def test_the_resume_preview_shows_what_the_user_typed(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    script = [
        {"tool_calls": [call("shell", {"command": "echo changed > notes.txt"})]},
        {"text": "Edited."},
        {"text": "Fine."},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("edit the notes")
        term.expect("Edited.")
        term.prompt()
        term.send_line("/undo")
        term.expect("restored notes.txt")
        term.prompt()
        term.send_line("what now")
        term.expect("Fine.")
        term.prompt()
        assert term.finish() == 0
        assert "The user reverted" in str(server.requests[-1].body)  # the model was told
        again = Terminal(["resume", "--last", *provider_flags(server.base_url, "chat")],
                         home=home, cwd=work)
        terminals.append(again)
        preview = again.expect("/help lists commands")
        assert again.finish() == 0
    assert "› edit the notes" in preview and "› what now" in preview
    assert "The user reverted" not in preview
