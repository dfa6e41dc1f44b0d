"""The error bodies of the servers people run locally (llama.cpp's llama-server,
llama-cpp-python's server, Ollama, LM Studio, vLLM), each mapped to the error class the
agent acts on: overflow compacts, a missing model names the fix, a refusal is not
retried, a busy or loading server is waited for. Shapes as those servers send them
(their sources and documentation); messages shortened where long."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_support import call, provider_flags, run_cli

from codemode.providers.base import (
    BadRequestError,
    ContextOverflowError,
    ModelNotFoundError,
    ProviderError,
    TransientError,
)
from codemode.providers.errors import ErrorContext, classify
from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer

LLAMA = ErrorContext("local", "smollm2", None, "http://127.0.0.1:8080/v1")
OLLAMA = ErrorContext("ollama", "qwen3:4b", None, "http://127.0.0.1:11434/v1")
LMSTUDIO = ErrorContext("lmstudio", "qwen2.5-coder-7b", None, "http://127.0.0.1:1234/v1")
VLLM = ErrorContext("vllm", "Qwen/Qwen2.5-7B-Instruct", None, "http://127.0.0.1:8000/v1")


def llama_server(code: int, kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """llama-server's format_error_response: {"error": {"code", "message", "type"}}."""
    return {"error": {"code": code, "message": message, "type": kind, **extra}}


def openai_shape(message: str, kind: str, code: Any = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


CASES: list[tuple[str, ErrorContext, int | None, Any, type[ProviderError]]] = [
    # --- context overflow ---
    ("llama-server overflow", LLAMA, 400, llama_server(
        400, "exceed_context_size_error",
        "request (8257 tokens) exceeds the available context size (8192 tokens), try "
        "increasing it", n_prompt_tokens=8257, n_ctx=8192), ContextOverflowError),
    ("llama-server overflow, older wording", LLAMA, 400, llama_server(
        400, "invalid_request_error",
        "input (5000 tokens) is larger than the max context size (4096 tokens). skipping"),
     ContextOverflowError),
    ("llama-server n_keep", LLAMA, 500, llama_server(
        500, "server_error", "the number of tokens to keep from the initial prompt is "
        "greater than the context length"), ContextOverflowError),
    ("llama-cpp-python overflow", LLAMA, 400, openai_shape(
        "This model's maximum context length is 2048 tokens. However, you requested 3020 "
        "tokens (3010 in the messages, 10 in the completion). Please reduce the length of "
        "the messages or completion.", "invalid_request_error", "context_length_exceeded"),
     ContextOverflowError),
    ("LM Studio overflow", LMSTUDIO, 400, {"error": (
        "Trying to keep the first 10136 tokens when context the overflows. However, the "
        "model is loaded with context length of only 7866 tokens, which is not enough. Try "
        "to load the model with a larger context length, or provide a shorter input")},
     ContextOverflowError),
    ("vLLM overflow", VLLM, 400, {"object": "error", "message": (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion)."), "type": "BadRequestError",
        "param": None, "code": 400}, ContextOverflowError),
    ("vLLM overflow, nested", VLLM, 400, openai_shape(
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
        "context length is 4096 tokens and your request has 2778 input tokens",
        "BadRequestError", 400), ContextOverflowError),
    ("Ollama overflow", OLLAMA, 400, {"error": "prompt too long; exceeded max context "
                                      "length by 120 tokens"}, ContextOverflowError),
    # --- model missing, not loaded, loading ---
    ("Ollama missing model", OLLAMA, 404, openai_shape(
        'model "qwen3:4b" not found, try pulling it first', "api_error"), ModelNotFoundError),
    ("Ollama native missing model", OLLAMA, 404, {"error": "model 'qwen3:4b' not found"},
     ModelNotFoundError),
    ("LM Studio nothing loaded", LMSTUDIO, 400, openai_shape(
        "No models loaded. Please load a model in the developer page or use the `lms load` "
        "command.", "invalid_request_error", "model_not_found"), ModelNotFoundError),
    ("vLLM unknown model", VLLM, 404, {"object": "error", "message": (
        "The model `qwen` does not exist."), "type": "NotFoundError", "param": None,
        "code": 404}, ModelNotFoundError),
    ("llama-server loading", LLAMA, 503, llama_server(
        503, "unavailable_error", "Loading model"), TransientError),
    # --- bad tool-call JSON in the history: deterministic, never retried ---
    ("llama-server bad tool JSON", LLAMA, 500, llama_server(
        500, "server_error", "Failed to parse tool call arguments as JSON: "
        "[json.exception.parse_error.101] parse error at line 1, column 79: syntax error "
        "while parsing value - unexpected end of input"), BadRequestError),
    ("llama-cpp-python bad body", LLAMA, 500, openai_shape(
        "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
        "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a "
        "valid string', 'input': None}", "internal_server_error"), BadRequestError),
    ("llama-server template refusal", LLAMA, 500, llama_server(
        500, "server_error", "Conversation roles must alternate user/assistant/user/"
        "assistant/..."), BadRequestError),
    ("llama-server unsupported", LLAMA, 501, llama_server(
        501, "not_supported_error", "This server does not support embeddings."),
     BadRequestError),
    ("Ollama model without tools", OLLAMA, 400, {"error": (
        "registry.ollama.ai/library/gemma:2b does not support tools")}, BadRequestError),
    # --- overload: waited for and retried ---
    ("Ollama queue full", OLLAMA, 503, {"error": (
        "server busy, please try again.  maximum pending requests exceeded")},
     TransientError),
    ("vLLM engine overloaded", VLLM, 503, openai_shape(
        "The server is overloaded", "ServiceUnavailableError", 503), TransientError),
    ("llama-server plain 500", LLAMA, 500, llama_server(
        500, "server_error", "Internal Server Error"), TransientError),
]


@pytest.mark.parametrize(("what", "ctx", "status", "payload", "kind"), CASES,
                         ids=[c[0] for c in CASES])
def test_local_server_errors_map_to_the_right_class(
    what: str, ctx: ErrorContext, status: int | None, payload: Any, kind: type[ProviderError]
) -> None:
    error = classify(ctx, status=status, payload=payload)
    assert type(error) is kind, f"{what}: {type(error).__name__}: {error}"
    assert str(error).startswith(f"{ctx.provider}: ")
    assert error.retryable == (kind is TransientError)


def test_the_same_shapes_inside_a_stream() -> None:
    """llama-server sends an error event inside a 200 stream for some failures."""
    event = llama_server(400, "exceed_context_size_error",
                         "request (9000 tokens) exceeds the available context size (8192 tokens)")
    error = classify(LLAMA, status=None, payload=event, in_stream=True)
    assert isinstance(error, ContextOverflowError)


def test_messages_say_what_to_do() -> None:
    pull = classify(OLLAMA, status=404, payload={"error": 'model "qwen3:4b" not found, '
                                                "try pulling it first"})
    assert "ollama pull qwen3:4b" in str(pull)
    load = classify(LMSTUDIO, status=400, payload=openai_shape(
        "No models loaded. Please load a model in the developer page or use the `lms load` "
        "command.", "invalid_request_error", "model_not_found"))
    assert "lms load" in str(load) and "Load a model" in str(load)
    loading = classify(LLAMA, status=503, payload=llama_server(503, "unavailable_error",
                                                               "Loading model"))
    assert "still loading the model" in str(loading)
    refused = classify(LLAMA, status=500, payload=llama_server(
        500, "server_error", "Failed to parse tool call arguments as JSON: parse error"))
    assert "not valid JSON" in str(refused) and "fail the same way" in str(refused)
    busy = classify(OLLAMA, status=503, payload={"error": "server busy, please try again.  "
                                                 "maximum pending requests exceeded"})
    assert "server busy" in str(busy)
    no_tools = classify(OLLAMA, status=400, payload={"error": "x does not support tools"})
    assert "reads calls from text" in str(no_tools)


def test_a_server_that_refuses_null_content_gets_an_empty_string(
    home: Path, work: Path
) -> None:
    """llama-cpp-python's server answers HTTP 500 (a pydantic validation error) to an
    assistant message whose content is null beside tool_calls; the chat wire learns it
    on the first refusal and sends "" to that server from then on."""
    refused = 0

    def server_like_llama_cpp_python(request: RecordedRequest) -> dict[str, Any]:
        nonlocal refused
        messages = request.body["messages"]
        if any(m["role"] == "assistant" and m.get("content") is None for m in messages):
            refused += 1
            return {"status": 500, "error_message": (
                "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', "
                "2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should "
                "be a valid string', 'input': None}")}
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [call("read_file", {"path": "notes.txt"})]}
        tools = sum(m["role"] == "tool" for m in messages)
        if tools < 2:
            return {"tool_calls": [call("read_file", {"path": "notes.txt"})]}
        return {"text": "done"}

    with ScriptedModelServer(server_like_llama_cpp_python) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "go"],
                      home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert refused == 1  # once, not once per request
    contents = [m.get("content") for m in server.requests[-1].body["messages"]
                if m["role"] == "assistant"]
    assert contents == ["", ""]
