"""A [model_providers.NAME] table written for Codex or Open Interpreter works here: every
provider key is accepted, what it asks for reaches the scripted server (headers, query
parameters, keys), retries and the idle timeout hold, and keys without effect here are
named in a notice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import run_cli

from codemode.assembly.model import resolve_provider
from codemode.config import Config, ConfigError
from codemode.providers.base import (
    AuthenticationError,
    Completed,
    ModelRequest,
    Provider,
    TransientError,
    UserMessage,
)
from codemode.providers.catalog import provider_info
from codemode.providers.retry import stream_with_retries
from codemode_testkit.scripted_server import ScriptedModelServer, ScriptedReply

ASK = ModelRequest(model="m", messages=[UserMessage(text="hi")])


def opened(table: dict[str, Any], notices: list[str] | None = None) -> Provider:
    config = Config(model_providers={"mine": table})
    return resolve_provider(config, "mine", notices)[0]


async def run(provider: Provider) -> list[Any]:
    try:
        events = []
        async for event in stream_with_retries(provider, ASK, sleep=_no_sleep):
            events.append(event)
        return events
    finally:
        await provider.aclose()


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.parametrize(("given", "wire"), [
    ("messages", "anthropic"), ("anthropic", "anthropic"), ("Messages", "anthropic"),
    ("chat", "chat"), ("responses", "responses"),
])
def test_wire_names(given: str, wire: str) -> None:
    assert provider_info("x", {"base_url": "http://h", "wire_api": given}).wire_api == wire


def test_unknown_wire_names_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match="'messages'") as caught:
        opened({"base_url": "http://h", "wire_api": "grpc"})
    assert "[model_providers.mine]" in str(caught.value)


async def test_messages_wire_reaches_the_messages_route() -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        provider = opened({"base_url": server.base_url, "wire_api": "messages"})
        events = await run(provider)
    assert isinstance(events[-1], Completed) and events[-1].message.text == "ok"
    assert server.requests[0].wire == "anthropic"


async def test_headers_query_params_and_keys_arrive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINE_KEY", "sk-mine")
    monkeypatch.setenv("MINE_PROJECT", "proj-7")
    monkeypatch.setenv("MINE_EMPTY", "  ")
    monkeypatch.delenv("MINE_UNSET", raising=False)
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        provider = opened({
            "name": "My Gateway",
            "base_url": server.base_url,
            "env_key": "MINE_KEY",
            "wire_api": "chat",
            "query_params": {"api-version": "2025-04-01-preview", "tag": "a b"},
            "http_headers": {"X-Fixed": "fixed-value"},
            "env_http_headers": {"X-Project": "MINE_PROJECT", "X-Empty": "MINE_EMPTY",
                                 "X-Unset": "MINE_UNSET"},
        })
        await run(provider)
    request = server.requests[0]
    assert request.query == "api-version=2025-04-01-preview&tag=a+b"
    assert request.headers["authorization"] == "Bearer sk-mine"
    assert request.headers["x-fixed"] == "fixed-value"
    assert request.headers["x-project"] == "proj-7"
    assert "x-empty" not in request.headers and "x-unset" not in request.headers


async def test_bearer_token_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        provider = opened({"base_url": server.base_url, "wire_api": "responses",
                           "experimental_bearer_token": "sk-in-config"})
        await run(provider)
    assert server.requests[0].headers["authorization"] == "Bearer sk-in-config"
    assert "sk-in-config" not in repr(provider_info("x", {
        "base_url": "http://h", "experimental_bearer_token": "sk-in-config"}))


async def test_requires_openai_auth_reads_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await run(opened({"base_url": server.base_url, "requires_openai_auth": True}))
    assert server.requests[0].headers["authorization"] == "Bearer sk-openai"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        opened({"base_url": "http://127.0.0.1:9", "requires_openai_auth": True})


def test_missing_key_error_carries_the_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINE_KEY", raising=False)
    with pytest.raises(AuthenticationError) as caught:
        opened({"base_url": "http://127.0.0.1:9", "env_key": "MINE_KEY",
                "env_key_instructions": "Create one at https://example.test/keys"})
    assert "set MINE_KEY" in str(caught.value)
    assert "Create one at https://example.test/keys" in str(caught.value)


@pytest.mark.parametrize(("retries", "attempts"), [(0, 1), (2, 3)])
async def test_request_max_retries(retries: int, attempts: int) -> None:
    replies = [ScriptedReply(status=503)] * 4 + [ScriptedReply(text="late")]
    with ScriptedModelServer(replies) as server:
        provider = opened({"base_url": server.base_url, "request_max_retries": retries})
        with pytest.raises(TransientError):
            await run(provider)
    assert len(server.requests) == attempts


async def test_stream_max_retries_counts_broken_streams_apart() -> None:
    # Two requests refused, then two streams cut midway: request_max_retries = 2 and
    # stream_max_retries = 1 allow the refusals and one cut, not the second.
    replies = [ScriptedReply(status=503), ScriptedReply(status=503),
               ScriptedReply(text="a long enough answer", cut_after_events=2),
               ScriptedReply(text="a long enough answer", cut_after_events=2),
               ScriptedReply(text="never")]
    with ScriptedModelServer(replies) as server:
        provider = opened({"base_url": server.base_url, "request_max_retries": 2,
                           "stream_max_retries": 1})
        with pytest.raises(TransientError):
            await run(provider)
    assert len(server.requests) == 4


@pytest.mark.timing
async def test_stream_idle_timeout() -> None:
    """A stream silent for longer than stream_idle_timeout_ms is lost, and retried."""
    slow = ScriptedReply(text="slow words here", chunk_delay_s=2.0)
    with ScriptedModelServer([slow, ScriptedReply(text="quick")]) as server:
        provider = opened({"base_url": server.base_url, "stream_idle_timeout_ms": 300})
        started = time.monotonic()
        events = await run(provider)
        took = time.monotonic() - started
    assert events[-1].message.text == "quick"
    assert len(server.requests) == 2
    assert took < 2.0 * 0.9  # gave up on the silent stream before its next chunk


def test_ignored_keys_are_named(tmp_path: Path) -> None:
    notices: list[str] = []
    opened({"base_url": "http://127.0.0.1:9", "supports_websockets": True,
            "websocket_connect_timeout_ms": 500}, notices)
    assert len(notices) == 2
    assert any("supports_websockets is ignored" in n for n in notices)
    assert all(n.startswith("[model_providers.mine]") for n in notices)


@pytest.mark.parametrize("table", [
    {"http_headers": {"X Bad": "v"}},
    {"http_headers": {"X-Ok": "v\r\nInjected: 1"}},
    {"env_http_headers": {"Bad:Name": "HOME"}},
])
def test_headers_that_cannot_be_sent_are_config_errors(table: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"\[model_providers\.mine\].*header"):
        opened({"base_url": "http://h", **table})


async def test_an_env_header_with_a_line_break_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MINE_EVIL", "a\r\nInjected: 1")
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        events = await run(opened({"base_url": server.base_url,
                                   "env_http_headers": {"X-Evil": "MINE_EVIL"}}))
    assert events[-1].message.text == "ok"
    assert "x-evil" not in server.requests[0].headers
    assert "injected" not in server.requests[0].headers


def test_unknown_keys_are_still_errors() -> None:
    with pytest.raises(ConfigError, match="bse_url"):
        opened({"base_url": "http://h", "bse_url": "http://h"})


def test_codex_display_name_is_the_description() -> None:
    info = provider_info("mine", {"name": "My Gateway", "base_url": "http://h"})
    assert info.name == "mine" and info.description == "My Gateway"


def test_exec_prints_the_notice(home: Path, tmp_path: Path) -> None:
    with ScriptedModelServer([ScriptedReply(text="fine")]) as server:
        result = run_cli(
            ["exec", "-c", "model_provider=gw",
             "-c", f"model_providers.gw.base_url={server.base_url}",
             "-c", "model_providers.gw.wire_api=messages",
             "-c", "model_providers.gw.supports_websockets=true", "--model", "m", "hello"],
            home=home, cwd=tmp_path,
        )
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == "fine"
    assert "[model_providers.gw]: supports_websockets is ignored" in result.stderr
    assert server.requests[0].wire == "anthropic"
