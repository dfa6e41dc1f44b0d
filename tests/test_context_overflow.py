"""A conversation that outgrows the model's context window inside one turn: the agent
shortens it (this turn's tool outputs included) and asks once more; a second overflow,
or one on a first request that has nothing to shorten, ends the turn with one line.

The scripted server here has a context window: it measures each request (a token per
four characters of its JSON body, as its usage reports do) and refuses the ones that do
not fit, in the error shape of each service (llama.cpp, Ollama, LM Studio, vLLM, OpenAI
chat and Responses, Anthropic).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_support import call, provider_flags, run_cli

from codemode.agent.compaction import head_and_tail
from codemode.providers.errors import ErrorContext, classify
from codemode_testkit.scripted.replies import RecordedRequest
from codemode_testkit.scripted_server import ScriptedModelServer

SEQ_PROGRAM = "const r = await tools.shell({command: 'seq 1 3000'});\nconsole.log(r.output);"


def size(request: RecordedRequest) -> int:
    return len(json.dumps(request.body)) // 4 + 1


def llama_cpp(n: int, m: int) -> dict[str, Any]:
    return {"status": 400, "error_message": f"request ({n} tokens) exceeds the available "
            f"context size ({m} tokens), try increasing it",
            "error_fields": {"type": "exceed_context_size_error", "code": 400,
                             "n_prompt_tokens": n, "n_ctx": m}}


# name: (wire, the refusal of a request of n tokens by a server with an m-token window)
SHAPES: dict[str, tuple[str, Callable[[int, int], dict[str, Any]]]] = {
    "llama.cpp": ("chat", llama_cpp),
    "ollama": ("chat", lambda n, m: {
        "status": 400, "error_message": "the input length exceeds the context length"}),
    "lm-studio": ("chat", lambda n, m: {
        "status": 400, "error_message": f"Trying to keep the first {n} tokens when context "
        f"the overflows. However, the model is loaded with context length of only {m} "
        "tokens, which is not enough. Try to load the model with a larger context length, "
        "or provide a shorter input"}),
    "vllm": ("chat", lambda n, m: {
        "status": 400, "error_message": f"This model's maximum context length is {m} tokens. "
        f"However, you requested {n + 256} tokens ({n} in the messages, 256 in the "
        "completion). Please reduce the length of the messages or completion.",
        "error_fields": {"type": "BadRequestError", "code": 400}}),
    "openai": ("chat", lambda n, m: {
        "status": 400, "error_code": "context_length_exceeded",
        "error_message": f"This model's maximum context length is {m} tokens. However, your "
        f"messages resulted in {n} tokens. Please reduce the length of the messages."}),
    "responses-stream": ("responses", lambda n, m: {
        "error_in_stream": True, "error_code": "context_length_exceeded",
        "error_message": "Your input exceeds the context window of this model. Please "
        "adjust your input and try again."}),
    "anthropic": ("anthropic", lambda n, m: {
        "status": 400, "error_message": f"prompt is too long: {n} tokens > {m} maximum"}),
}


class WindowedModel:
    """Replies in order, but refuses (without using up a reply) any request larger than
    the window; the window is the first request's size plus ``room``."""

    def __init__(self, replies: list[dict[str, Any]], refuse: Callable[[int, int], dict[str, Any]],
                 room: int = 1500, window: int | None = None) -> None:
        self.replies = list(replies)
        self.refuse = refuse
        self.room = room
        self.window = window
        self.sizes: list[tuple[int, bool]] = []  # (tokens, accepted)

    def __call__(self, request: RecordedRequest) -> dict[str, Any]:
        tokens = size(request)
        if self.window is None:
            self.window = tokens + self.room
        if tokens > self.window:
            self.sizes.append((tokens, False))
            return self.refuse(tokens, self.window)
        self.sizes.append((tokens, True))
        return self.replies.pop(0) if self.replies else {"text": "(script exhausted)"}


def exec_run(server: ScriptedModelServer, wire: str, home: Path, work: Path, *args: str):
    return run_cli(["exec", *provider_flags(server.base_url, wire), *args],
                   home=home, cwd=work, timeout=120)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_overflow_inside_a_turn_is_shortened_and_retried(
    shape: str, home: Path, work: Path
) -> None:
    """The issue's case: request 1 runs `seq 1 3000` through a program, request 2 does not
    fit; the output is cut to its head and tail, and the turn completes."""
    wire, refuse = SHAPES[shape]
    model = WindowedModel([{"tool_calls": [call("exec", {"code": SEQ_PROGRAM})]},
                           {"text": "the numbers run from 1 to 3000"}], refuse)
    with ScriptedModelServer(model) as server:
        run = exec_run(server, wire, home, work, "--code-mode", "count")
        sent = [json.dumps(r.body) for r in server.requests]
    assert run.code == 0, run.stderr
    assert "the numbers run from 1 to 3000" in run.stdout
    assert [ok for _, ok in model.sizes] == [True, False, True], model.sizes
    assert model.window is not None and model.sizes[2][0] <= model.window
    retried = sent[2]
    assert "cut from the middle of this output to fit the context window" in retried
    assert "\\n1\\n2\\n3\\n" in retried.replace("\\\\n", "\\n") or "1\\n2\\n3" in retried
    assert "2999" in retried and "3000" in retried  # the tail is kept
    assert "1500\\n1501" not in retried.replace("\\\\n", "\\n")  # the middle is not
    assert "context window" in run.stderr and "retrying" in run.stderr
    print(f"\n{shape}: window {model.window}, requests (tokens, accepted): {model.sizes}")


@pytest.mark.parametrize("harness", ["native", "minimal"])
def test_the_classic_dialects_output_is_shortened_the_same_way(
    harness: str, home: Path, work: Path
) -> None:
    tool = "shell" if harness == "native" else "bash"
    model = WindowedModel([{"tool_calls": [call(tool, {"command": "seq 1 3000"})]},
                           {"text": "counted"}], llama_cpp)
    with ScriptedModelServer(model) as server:
        run = exec_run(server, "chat", home, work, "--classic", "--harness", harness, "count")
        retried = json.dumps(server.requests[-1].body)
    assert run.code == 0, run.stderr
    assert [ok for _, ok in model.sizes] == [True, False, True], model.sizes
    assert "cut from the middle of this output" in retried and "2999" in retried


def test_once_the_window_is_known_requests_are_shortened_before_sending(
    home: Path, work: Path
) -> None:
    """After llama.cpp said its n_ctx, a second large output is cut before the request
    goes out: no second overflow."""
    again = SEQ_PROGRAM.replace("seq 1 3000", "seq 5000 8000")
    model = WindowedModel([{"tool_calls": [call("exec", {"code": SEQ_PROGRAM})]},
                           {"tool_calls": [call("exec", {"code": again})]},
                           {"text": "done"}], llama_cpp)
    with ScriptedModelServer(model) as server:
        run = exec_run(server, "chat", home, work, "--code-mode", "count")
        last = json.dumps(server.requests[-1].body)
    assert run.code == 0, run.stderr
    assert [ok for _, ok in model.sizes] == [True, False, True, True], model.sizes
    assert "nearly full" in run.stderr
    assert "7999" in last and "cut from the middle" in last


def test_a_second_overflow_ends_the_turn_with_one_line(home: Path, work: Path) -> None:
    """A server that keeps refusing (its window shrank, or the estimate is far off): one
    retry, then one line that says what to do, and exit 1."""
    model = WindowedModel([{"tool_calls": [call("exec", {"code": SEQ_PROGRAM})]}], llama_cpp)

    def shrinking(request: RecordedRequest) -> dict[str, Any]:
        if model.sizes:  # after the first request the server accepts nothing
            model.window = 10
        return model(request)

    with ScriptedModelServer(shrinking) as server:
        run = exec_run(server, "chat", home, work, "--code-mode", "count")
    assert run.code == 1
    assert [ok for _, ok in model.sizes] == [True, False, False]
    errors = [line for line in run.stderr.splitlines() if "does not fit" in line]
    assert len(errors) == 1, run.stderr
    assert "even after shortening it" in errors[0] and "/new" in errors[0]
    assert "Traceback" not in run.stderr


def test_an_overflow_on_the_first_request_says_the_sizes_and_the_remedies(
    home: Path, work: Path
) -> None:
    model = WindowedModel([{"text": "never"}], llama_cpp, window=200)
    with ScriptedModelServer(model) as server:
        run = exec_run(server, "chat", home, work, "--code-mode", "hi")
    assert run.code == 1
    assert len(model.sizes) == 1  # no retry loop
    prompt = model.sizes[0][0]
    assert f"({prompt:,} tokens" in run.stderr and "200-token context window" in run.stderr
    assert "llama-server -c" in run.stderr and "--harness minimal" in run.stderr
    assert "Traceback" not in run.stderr


# --- the sizes in each service's error ------------------------------------------------------


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "responses-stream"])
def test_each_services_overflow_is_recognised_with_its_sizes(shape: str) -> None:
    wire, refuse = SHAPES[shape]
    reply = refuse(9100, 8192)
    error: dict[str, Any] = {"message": reply["error_message"], **reply.get("error_fields", {})}
    if reply.get("error_code"):
        error["code"] = reply["error_code"]
    payload = ({"type": "error", "error": {"type": "invalid_request_error", **error}}
               if wire == "anthropic" else {"error": error})
    exc = classify(ErrorContext("p", "m"), status=400, payload=payload)
    assert type(exc).__name__ == "ContextOverflowError", exc
    if shape == "ollama":  # says no sizes
        assert exc.context_window is None and exc.prompt_tokens is None  # type: ignore[attr-defined]
    else:
        assert exc.context_window == 8192, shape  # type: ignore[attr-defined]
        assert exc.prompt_tokens == 9100, shape  # type: ignore[attr-defined]


def test_ollamas_excess_and_geminis_counts() -> None:
    ctx = ErrorContext("p", "m")
    ollama = classify(ctx, status=400, payload={
        "error": "prompt too long; exceeded max context length by 612 tokens"})
    assert ollama.excess_tokens == 612  # type: ignore[attr-defined]
    gemini = classify(ctx, status=400, payload={"error": {"message": "The input token count "
                      "(40000) exceeds the maximum number of tokens allowed (32768)."}})
    assert (gemini.prompt_tokens, gemini.context_window) == (40000, 32768)  # type: ignore[attr-defined]


def test_head_and_tail_keep_both_ends_at_line_breaks() -> None:
    text = "".join(f"{i}\n" for i in range(1, 3001))
    cut = head_and_tail(text, 600)
    assert cut.startswith("1\n2\n3\n") and cut.endswith("2999\n3000\n")
    assert len(cut) < 1000
    head, note, tail = cut.partition("[... ")[0], "[... ", cut.partition("...]")[2]
    assert head.endswith("\n") and tail.startswith("\n")
    assert note and "lines) cut from the middle" in cut
    assert head_and_tail("short", 600) == "short"


# --- what is shortened first ----------------------------------------------------------------


def conversation() -> tuple[list[Any], int]:
    """Two earlier turns (a long prompt, a long output) and the current one (two outputs)."""
    from codemode.providers.base import AssistantMessage, ToolCall, ToolResultMessage, UserMessage

    def round_(n: int, output: str) -> list[Any]:
        return [AssistantMessage(tool_calls=[ToolCall(id=f"c{n}", name="bash", arguments="{}")]),
                ToolResultMessage(call_id=f"c{n}", name="bash", content=output)]

    numbers = "".join(f"{i}\n" for i in range(1, 3001))
    messages = [UserMessage(text="pasted log:\n" + "error at line 7\n" * 400),
                *round_(1, numbers), AssistantMessage(text="done"),
                UserMessage(text="second"), *round_(2, "short"), AssistantMessage(text="ok"),
                UserMessage(text="now"), *round_(3, numbers), *round_(4, numbers)]
    return messages, 8


def test_earlier_outputs_go_first_then_this_turns_older_output() -> None:
    from codemode.agent.compaction import REMOVED, shorten, text_units

    messages, start = conversation()
    numbers = text_units("".join(f"{i}\n" for i in range(1, 3001)))
    done = shorten(messages, start, numbers - 100)
    assert done.removed == 1 and messages[2].content == REMOVED  # turn 1's output
    assert done.dropped == 0 and done.short == 0
    # The saving was met by the earlier output alone: this turn's outputs are whole.
    assert messages[start + 2].content.endswith("3000\n")
    assert "cut from the middle" not in messages[start + 4].content


def test_this_turns_outputs_are_cut_older_first_then_earlier_turns_dropped() -> None:
    from codemode.agent.compaction import message_units, shorten

    messages, start = conversation()
    total = sum(message_units(m) for m in messages)
    done = shorten(messages, start, total - 1200)  # keep ~1,200 units of ~25,000
    assert done.trimmed == 2 and done.dropped == start
    assert done.turn_start == 0 and messages[0].text.startswith(f"[{start} earlier messages")
    older, latest = messages[2].content, messages[4].content
    assert "cut from the middle" in older and "cut from the middle" in latest
    assert older.startswith("1\n2\n") and latest.rstrip().endswith("3000")
    # Calls and results still pair up.
    assert [type(m).__name__ for m in messages[1:]] == [
        "AssistantMessage", "ToolResultMessage", "AssistantMessage", "ToolResultMessage"]
