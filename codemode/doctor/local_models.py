"""``interpreter doctor --local``: find model servers on this machine and put one
tool-calling round trip through each, saying what works.

The usual ports of llama.cpp's llama-server, Ollama, LM Studio and vLLM, plus any
configured provider whose base_url is on the loopback, are asked for ``/models``; each
server that answers gets three requests on the chat wire (the one they all speak): a
streamed reply, a request offering one tool, and the tool's result sent back.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from codemode.doctor.report import Report

USUAL = {
    "llamacpp": "http://127.0.0.1:8080/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
    "vllm": "http://127.0.0.1:8000/v1",
}
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
_TOOL: dict[str, Any] = {
    "name": "add",
    "description": "Add two integers and return their sum.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}
_ASK = "Use the add tool to add 2 and 3. Call the tool; do not answer in text."


@dataclass
class Candidate:
    name: str
    base_url: str


def candidates(config: Any, extra: list[str]) -> list[Candidate]:
    """The servers to probe: --base-url ones, configured loopback providers, the usual."""
    found: dict[str, Candidate] = {}
    for url in extra:
        found.setdefault(url.rstrip("/"), Candidate(urlsplit(url).netloc or url, url.rstrip("/")))
    tables = getattr(config, "model_providers", {}) or {}
    for name, table in tables.items():
        url = str(table.get("base_url", "")).rstrip("/")
        if url and urlsplit(url).hostname in _LOOPBACK:
            found.setdefault(url, Candidate(name, url))
    if not extra:
        for name, url in USUAL.items():
            found.setdefault(url, Candidate(name, url))
    return list(found.values())


async def _models(base_url: str) -> list[str] | None:
    import httpx  # lazy: httpx, for the local-server probe only

    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(3.0)) as client:
            reply = await client.get(f"{base_url}/models")
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return []
    try:
        data = reply.json().get("data") or []
    except (ValueError, AttributeError):
        return []
    return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]


async def _round_trip(report: Report, where: Candidate, model: str) -> None:
    from codemode.providers.base import (
        AssistantMessage,
        Completed,
        Message,
        ModelRequest,
        ProviderError,
        TextDelta,
        ToolCallDelta,
        ToolResultMessage,
        ToolSpec,
        UserMessage,
    )
    from codemode.providers.chat import ChatProvider  # lazy: httpx, for the local-server probe only

    label = where.name
    provider = ChatProvider(name=where.name, base_url=where.base_url, timeout_s=180)
    spec = ToolSpec(**_TOOL)

    async def ask(request: ModelRequest) -> tuple[Completed, int, int, float]:
        texts = calls = 0
        start = time.monotonic()
        done: Completed | None = None
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                texts += 1
            elif isinstance(event, ToolCallDelta):
                calls += 1
            elif isinstance(event, Completed):
                done = event
        assert done is not None
        return done, texts, calls, time.monotonic() - start

    try:
        done, texts, _, took = await ask(ModelRequest(
            model=model, messages=[UserMessage(text="Say hello in five words.")],
            max_output_tokens=16, temperature=0))
        speed = (f", {done.usage.output_tokens / took:.1f} tokens/s"
                 if done.usage.output_tokens and took > 0 else "")
        report.add("local", f"{label} text", "ok",
                   f"streamed {texts} text deltas in {took:.1f}s{speed} "
                   f"(stop: {done.stop_reason})")
        first = UserMessage(text=_ASK)
        done, _, deltas, took = await ask(ModelRequest(
            model=model, messages=[first], tools=[spec], max_output_tokens=48, temperature=0))
        if not done.message.tool_calls:
            report.add("local", f"{label} tool call", "warn",
                       f"the model answered in text, not with a tool call ({took:.1f}s): "
                       f"{done.message.text[:80]!r}",
                       "a small model may need a text harness (--harness mini-swe-agent); "
                       "llama-server needs --jinja and a chat template with tools")
            return
        call = done.message.tool_calls[0]
        report.add("local", f"{label} tool call", "ok",
                   f"{call.name}({call.arguments[:60]}) in {deltas} streamed deltas, "
                   f"{took:.1f}s")
        try:
            args = json.loads(call.arguments)
            result = str(int(args["a"]) + int(args["b"]))
        except (ValueError, KeyError, TypeError):
            result = "error: the arguments were not {\"a\": int, \"b\": int}"
        history: list[Message] = [first, AssistantMessage(tool_calls=[call], wire="chat"),
                   ToolResultMessage(call_id=call.id, name=call.name, content=result)]
        done, _, _, took = await ask(ModelRequest(
            model=model, messages=history, tools=[spec], max_output_tokens=32, temperature=0))
        report.add("local", f"{label} tool result", "ok",
                   f"the server took the result back and answered in {took:.1f}s: "
                   f"{(done.message.text or '(a tool call)')[:60]!r}")
    except ProviderError as exc:
        report.add("local", f"{label} round trip", "error", str(exc),
                   "see the server's log; `interpreter doctor --local` again after fixing")
    finally:
        await provider.aclose()


async def check_local(report: Report, config: Any, urls: list[str], model: str | None) -> None:
    found = 0
    for where in candidates(config, urls):
        models = await _models(where.base_url)
        if models is None:
            if urls:
                report.add("local", where.name, "error", f"nothing answers at {where.base_url}",
                           "start the server, or check --base-url")
            continue
        found += 1
        chosen = model or (models[0] if models else None)
        listed = ", ".join(models[:5]) or "none listed"
        report.add("local", where.name, "ok", f"{where.base_url}: models: {listed}")
        if chosen is None:
            report.add("local", f"{where.name} model", "error", "the server lists no model",
                       "load or pull a model, or pass --model")
            continue
        await _round_trip(report, where, chosen)
    if not found and not urls:
        ports = ", ".join(f"{n} {urlsplit(u).port}" for n, u in USUAL.items())
        report.add("local", "servers", "error", f"no model server answers on the usual "
                   f"ports ({ports})", "start one, or pass --base-url URL")


def run_local_checks(urls: list[str], model: str | None) -> Report:
    from codemode.config import ConfigError, load_config

    report = Report()
    try:
        config: Any = load_config()
    except ConfigError as exc:
        report.add("local", "config", "warn", str(exc))
        config = None
    asyncio.run(check_local(report, config, urls, model))
    return report
