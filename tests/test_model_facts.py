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
from codemode_testkit.scripted_server import ScriptedModelServer


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
    """trytako/tako has a 2,048-token window: when the next request would come too near
    it, the older tool output is cut to its head and tail before it goes out (no
    overflow error needed), and the latest is kept whole."""
    facts = model_facts("poe", "trytako/tako")
    assert facts is not None and facts.context_window == 2048
    (work / "a.txt").write_text("alpha " * 800, encoding="utf-8")  # ~1,200 tokens
    (work / "b.txt").write_text("beta " * 300, encoding="utf-8")  # ~375
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "cat a.txt"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "cat b.txt"}}]},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *catalog_flags("poe", server.base_url, "trytako/tako"),
                       "--harness", "minimal", "--classic", "go"],
                      home=home, cwd=work, POE_API_KEY="sk-test")
    assert run.code == 0, run.stderr
    sent = [json.dumps(r.body) for r in server.requests]
    sizes = [len(s) // 4 for s in sent]  # what the scripted server reports as usage
    assert sizes[1] < 1711 < sizes[1] + 375, sizes  # 2,048 less the answer's room
    assert "alpha " * 799 in sent[1]  # it fits: nothing cut
    assert "alpha " * 799 not in sent[2] and "cut from the middle of this output" in sent[2]
    assert "beta " * 299 in sent[2]  # the latest result is kept whole
    assert sizes[2] < 2048
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
