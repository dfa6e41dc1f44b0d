"""A session uses what the catalog knows about its model: a model that cannot call tools
gets a harness that reads actions from the text (or a warning when a harness was
chosen), a model that does not reason is not sent a reasoning effort, and a known
context window has old tool outputs cut before a request comes near it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_support import run_cli

from codemode.providers.catalog import model_facts
from codemode.testing.scripted_server import ScriptedModelServer


def catalog_flags(provider: str, base_url: str, model: str) -> list[str]:
    """A catalog provider (so its model facts apply) pointed at the scripted server."""
    return ["-c", f"model_provider={provider}",
            "-c", f"model_providers.{provider}.base_url={base_url}", "--model", model]


def offered_tools(body: dict[str, Any]) -> list[str]:
    return [(t.get("function") or t).get("name") for t in body.get("tools") or []]


def test_a_model_without_tool_calls_gets_a_text_harness(home: Path, work: Path) -> None:
    facts = model_facts("moonshotai", "moonshot-v1-8k")
    assert facts is not None and not facts.tool_calling
    reply = "Done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    with ScriptedModelServer([{"text": reply}] * 3) as server:
        run = run_cli(["exec", *catalog_flags("moonshotai", server.base_url, "moonshot-v1-8k"),
                       "say hi"], home=home, cwd=work, MOONSHOT_API_KEY="sk-test")
    assert "Traceback" not in run.stderr
    assert "cannot call tools: using the mini-swe-agent harness" in run.stderr
    assert offered_tools(server.requests[0].body) == []
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in json.dumps(server.requests[0].body)


def test_a_chosen_harness_is_kept_with_a_warning(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "hello"}]) as server:
        run = run_cli(["exec", *catalog_flags("moonshotai", server.base_url, "moonshot-v1-8k"),
                       "--harness", "native", "say hi"],
                      home=home, cwd=work, MOONSHOT_API_KEY="sk-test")
    assert run.code == 0, run.stderr
    assert "warning: the catalog says moonshot-v1-8k cannot call tools" in run.stderr
    assert "shell" in offered_tools(server.requests[0].body)


def test_a_tool_calling_model_keeps_its_harness(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "hello"}]) as server:
        run = run_cli(["exec", *catalog_flags("deepseek", server.base_url, "deepseek-chat"),
                       "say hi"], home=home, cwd=work, DEEPSEEK_API_KEY="sk-test")
    assert run.code == 0, run.stderr
    assert "cannot call tools" not in run.stderr
    assert "shell" in offered_tools(server.requests[0].body)


def test_reasoning_effort_is_not_sent_to_a_model_that_does_not_reason(
    home: Path, work: Path
) -> None:
    facts = model_facts("deepseek", "deepseek-chat")
    assert facts is not None and not facts.reasoning
    with ScriptedModelServer([{"text": "a"}, {"text": "b"}]) as server:
        plain = run_cli(["exec", *catalog_flags("deepseek", server.base_url, "deepseek-chat"),
                         "-c", "model_reasoning_effort=high", "hi"],
                        home=home, cwd=work, DEEPSEEK_API_KEY="sk-test")
        reasoner = run_cli(["exec", *catalog_flags("deepseek", server.base_url,
                                                   "deepseek-reasoner"),
                            "-c", "model_reasoning_effort=high", "hi"],
                           home=home, cwd=work, DEEPSEEK_API_KEY="sk-test")
    assert plain.code == 0 and reasoner.code == 0, plain.stderr + reasoner.stderr
    assert "model_reasoning_effort is not sent" in plain.stderr
    assert "reasoning_effort" not in server.requests[0].body
    assert server.requests[1].body.get("reasoning_effort") == "high"


def test_old_outputs_are_cut_before_the_context_window_fills(home: Path, work: Path) -> None:
    """trytako/tako has a 2,048-token window: after a request that used 1,900 of it, the
    next one goes out with the older tool output cut (no overflow error needed)."""
    facts = model_facts("poe", "trytako/tako")
    assert facts is not None and facts.context_window == 2048
    (work / "a.txt").write_text("alpha " * 200, encoding="utf-8")
    (work / "b.txt").write_text("beta " * 200, encoding="utf-8")
    full = {"input_tokens": 1900, "output_tokens": 20}
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}], "usage": full},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}],
         "usage": {"input_tokens": 300, "output_tokens": 20}},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "b.txt"}}], "usage": full},
        {"text": "done", "usage": full},
    ]
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *catalog_flags("poe", server.base_url, "trytako/tako"), "go"],
                      home=home, cwd=work, POE_API_KEY="sk-test")
    assert run.code == 0, run.stderr
    sent = [json.dumps(r.body) for r in server.requests]
    assert "alpha alpha" in sent[1]  # 1,900 of 2,048 used, but one result only: kept
    assert "alpha alpha" in sent[2]  # the last request used 320: nothing cut
    assert "alpha alpha" not in sent[3] and "removed to fit the context window" in sent[3]
    assert "beta beta" in sent[3]  # the latest result is kept
    assert "nearly full" in run.stderr


def test_the_interactive_session_shows_the_facts(home: Path, work: Path) -> None:
    """/status says what the catalog knows about the model; /reasoning warns when the
    model does not reason (piped, so the session reads commands from stdin)."""
    import subprocess

    from agent_support import INTERPRETER, cli_env

    with ScriptedModelServer([{"text": "hello"}]) as server:
        proc = subprocess.run(
            [str(INTERPRETER), *catalog_flags("deepseek", server.base_url, "deepseek-chat")],
            input="hi\n/status\n/reasoning\n", capture_output=True, text=True, cwd=work,
            env=cli_env(home, DEEPSEEK_API_KEY="sk-test"), timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    facts = model_facts("deepseek", "deepseek-chat")
    assert facts is not None and facts.context_window
    assert (f"catalog    {facts.context_window:,}-token context, does not reason, calls tools"
            in proc.stdout)
    assert "the catalog says deepseek-chat does not reason" in proc.stdout
