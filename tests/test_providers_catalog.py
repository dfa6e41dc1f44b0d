"""The provider catalog, key resolution, error mapping details, and the retry policy."""

from __future__ import annotations

import email.utils
import subprocess
import sys
import time

import pytest

from codemode.providers.base import (
    AuthenticationError,
    BadRequestError,
    ModelNotFoundError,
    ProviderError,
    RateLimitError,
    TransientError,
)
from codemode.providers.catalog import ProviderInfo, builtin_providers, open_provider
from codemode.providers.errors import ErrorContext, classify, parse_retry_after
from codemode.providers.retry import RetryPolicy

REQUIRED = {
    "openai": ("responses", "OPENAI_API_KEY", "openai"),
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY", "anthropic"),
    "deepseek": ("chat", "DEEPSEEK_API_KEY", "deepseek"),
    "moonshotai": ("chat", "MOONSHOT_API_KEY", "kimi"),
    "kimi-for-coding": ("chat", "KIMI_API_KEY", "kimi"),
    "dashscope": ("chat", "DASHSCOPE_API_KEY", "qwen"),
    "zai": ("chat", "ZAI_API_KEY", "glm"),
    "openrouter": ("chat", "OPENROUTER_API_KEY", "other"),
    "groq": ("chat", "GROQ_API_KEY", "other"),
    "ollama": ("chat", None, "other"),
    "lmstudio": ("chat", None, "other"),
}


def test_required_providers_are_in_the_catalog() -> None:
    catalog = builtin_providers()
    for name, (wire, env_key, family) in REQUIRED.items():
        info = catalog[name]
        assert (info.wire_api, info.env_key, info.family) == (wire, env_key, family), name
        assert info.name == name
        assert info.base_url.startswith(("https://", "http://127.0.0.1:")), name
    assert catalog["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert catalog["lmstudio"].base_url == "http://127.0.0.1:1234/v1"


def test_catalog_entries_are_fresh_copies() -> None:
    builtin_providers()["openai"].base_url = "http://changed"
    assert builtin_providers()["openai"].base_url == "https://api.openai.com/v1"


def test_open_provider_picks_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = builtin_providers()
    for name, wire in [("openai", "responses"), ("anthropic", "anthropic"), ("deepseek", "chat")]:
        provider = open_provider(catalog[name], api_key="k")
        assert provider.wire == wire
        assert provider.name == name


def test_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-env")
    provider = open_provider(builtin_providers()["deepseek"])
    assert provider.transport._headers["Authorization"] == "Bearer sk-from-env"  # type: ignore[attr-defined]


def test_local_provider_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = open_provider(builtin_providers()["ollama"])
    assert "Authorization" not in provider.transport._headers  # type: ignore[attr-defined]


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="set DEEPSEEK_API_KEY"):
        open_provider(builtin_providers()["deepseek"])


def test_user_entry_needs_only_a_base_url() -> None:
    info = ProviderInfo.model_validate({"base_url": "http://127.0.0.1:8000/v1"})
    assert info.wire_api == "chat" and info.env_key is None and info.headers == {}
    with pytest.raises(ValueError, match="wire_api"):
        ProviderInfo.model_validate({"base_url": "http://x", "wire_api": "grpc"})
    with pytest.raises(ValueError, match="base_ur"):
        ProviderInfo.model_validate({"base_ur": "http://x"})


def test_providers_package_does_not_import_httpx() -> None:
    code = ("import sys, codemode.providers.catalog, codemode.providers.base, "
            "codemode.providers.retry; print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- error mapping ------------------------------------------------------------------

CTX = ErrorContext(provider="p", model="m-1", env_key="P_KEY", base_url="http://h/v1")


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "12"}) == 12
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": when}) or 0) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(("status", "payload", "kind"), [
    (400, {"error": {"message": "x", "code": "context_length_exceeded"}}, "ContextOverflowError"),
    (400, {"type": "error", "error": {"type": "invalid_request_error",
                                      "message": "prompt is too long: 5 > 4"}},
     "ContextOverflowError"),
    (400, {"error": {"message": "The model `m-1` does not exist"}}, "ModelNotFoundError"),
    (403, {"error": {"message": "forbidden"}}, "AuthenticationError"),
    (429, {"error": {"message": "quota", "code": "insufficient_quota"}}, "BadRequestError"),
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
     "TransientError"),
    (422, "plain text body", "BadRequestError"),
    (None, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
     "TransientError"),
    (None, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
     "RateLimitError"),
])
def test_classify(status: int | None, payload: object, kind: str) -> None:
    error = classify(CTX, status=status, payload=payload)
    assert type(error).__name__ == kind
    assert str(error).startswith("p: ")


def test_classify_messages_are_specific() -> None:
    auth = classify(CTX, status=401, payload={"error": {"message": "bad key"}})
    assert isinstance(auth, AuthenticationError) and "set P_KEY" in str(auth)
    missing = classify(CTX, status=404, payload={"error": {"message": "no"}})
    assert isinstance(missing, ModelNotFoundError) and "'m-1'" in str(missing)
    assert "http://h/v1" in str(missing)
    limited = classify(CTX, status=429, payload="", headers={"retry-after": "3"})
    assert isinstance(limited, RateLimitError) and limited.retry_after == 3
    refused = classify(CTX, status=500, payload="", headers={"x-should-retry": "false"})
    assert isinstance(refused, TransientError) and not refused.retryable
    assert TransientError("x").retryable  # the class default is untouched
    assert isinstance(classify(CTX, status=418, payload="teapot"), BadRequestError)


# --- retry policy --------------------------------------------------------------------


def test_backoff_is_exponential_with_full_jitter() -> None:
    policy = RetryPolicy(base_delay_s=1, max_delay_s=5)
    error = TransientError("x")
    for attempt, cap in [(1, 1), (2, 2), (3, 4), (4, 5), (8, 5)]:
        delays = [policy.delay(attempt, error) for _ in range(200)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap * 0.5  # jitter spreads over the range


def test_retry_after_is_honoured_up_to_a_cap() -> None:
    policy = RetryPolicy(max_retry_after_s=60)
    assert policy.delay(1, RateLimitError("x", retry_after=12)) == 12
    assert policy.delay(1, RateLimitError("x", retry_after=3600)) == 60
    assert not ProviderError("x").retryable


def test_responses_error_event_shape() -> None:
    event = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down",
             "param": None}
    error = classify(CTX, status=None, payload=event, in_stream=True)
    assert isinstance(error, RateLimitError) and "slow down" in str(error)


# --- stream assembly from shapes the scripted server does not produce -----------------


def test_chat_assembly_tolerates_loose_servers() -> None:
    from codemode.providers.chat import _ChatStream

    state = _ChatStream()
    chunks = [
        # reasoning under both names with the same text: counted once
        {"choices": [{"delta": {"reasoning_content": "hm", "reasoning": "hm"}}]},
        # no index, no id: a server that sends each call whole
        {"choices": [{"delta": {"tool_calls": [
            {"function": {"name": "shell", "arguments": {"cmd": "ls"}}}]}}]},
        {"choices": [{"delta": {"tool_calls": [
            {"id": "b", "function": {"name": "grep", "arguments": '{"q": 1}'}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 4}},
    ]
    for chunk in chunks:
        state.feed(chunk)
    done = state.completed()
    assert done.message.reasoning == "hm"
    assert [(c.id, c.name, c.arguments) for c in done.message.tool_calls] == [
        ("call_0", "shell", '{"cmd": "ls"}'), ("b", "grep", '{"q": 1}')]
    assert done.stop_reason == "tool_calls"
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (10, 4)


def test_responses_assembly_from_done_items_alone() -> None:
    from codemode.providers.responses import _ResponsesStream

    state = _ResponsesStream()
    state.feed("response.output_item.done", {"output_index": 0, "item": {
        "type": "message", "content": [{"type": "output_text", "text": "whole"}]}})
    state.feed("response.output_item.done", {"output_index": 1, "item": {
        "type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell",
        "arguments": '{"cmd": "ls"}'}})
    state.feed("response.incomplete", {"response": {
        "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 3}}})
    done = state.completed()
    assert done.message.text == "whole"
    assert [(c.id, c.arguments) for c in done.message.tool_calls] == [("c1", '{"cmd": "ls"}')]
    assert done.stop_reason == "length"
    assert done.usage.input_tokens == 3


def test_anthropic_usage_merges_start_and_delta() -> None:
    from codemode.providers.anthropic import _MessagesStream

    state = _MessagesStream()
    state.feed("message_start", {"message": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}})
    state.feed("message_delta", {"delta": {"stop_reason": "max_tokens"},
                                 "usage": {"input_tokens": 10, "output_tokens": 40}})
    state.feed("message_stop", {})
    done = state.completed()
    assert (done.usage.input_tokens, done.usage.cached_input_tokens,
            done.usage.output_tokens) == (100, 90, 40)
    assert done.stop_reason == "length"
