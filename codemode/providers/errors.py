"""Turning a provider's failure (an HTTP status, an error body, an error event inside the
stream) into one of the ``ProviderError`` classes, with a message a user can act on.

Every wire shares this: the error bodies of OpenAI-compatible services and of Anthropic
differ in shape but carry the same three facts (a status or type, a code, a message).
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codemode.providers.base import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    MissingKeyError,
    ModelNotFoundError,
    ProviderError,
    RateLimitError,
    TransientError,
)
from codemode.providers.overflow import overflow_sizes


@dataclass(frozen=True)
class ErrorContext:
    """What a message needs to name: the provider, its key variable, the model."""

    provider: str
    model: str
    env_key: str | None = None
    base_url: str = ""


# Phrases that services use for "the prompt does not fit", across OpenAI, Anthropic,
# DeepSeek, Moonshot, DashScope, OpenRouter, Groq and the local servers: llama.cpp's
# llama-server ("request (N tokens) exceeds the available context size (M tokens)",
# type exceed_context_size_error; older builds "input (N tokens) is larger than the max
# context size"; "the number of tokens to keep from the initial prompt is greater than
# the context length"), LM Studio ("Trying to keep the first N tokens when context the
# overflows. However, the model is loaded with context length of only M tokens"),
# llama-cpp-python ("Requested tokens (N) exceed context window of M"), vLLM ("This
# model's maximum context length is N tokens. However, you requested M tokens") and
# Ollama ("prompt too long; exceeded max context length by N tokens").
_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|prompt is too long"
    r"|context window|exceeds? the (available )?context|context length|too many tokens"
    r"|input is too long|reduce the length of the messages|exceed_context_size"
    r"|larger than the max context size|context size|context the overflows"
    r"|context overflows|prompt too long|maximum model length"
    r"|exceeds the maximum number of tokens",
    re.IGNORECASE,
)
_MODEL_PATTERNS = re.compile(
    r"model[_ ]not[_ ]found|model .{0,80}(does not exist|not found|not exist)"
    r"|(unknown|no such) model|not a valid model|no models? (is )?loaded",
    re.IGNORECASE,
)
# A local server that is still reading the weights (llama-server: 503 "Loading model",
# type unavailable_error): worth waiting for.
_LOADING_PATTERNS = re.compile(r"loading model|model is (still )?loading", re.IGNORECASE)
# Refusals that no retry can change: the request itself is what the server cannot take.
# llama-server answers HTTP 500 for them ("Failed to parse tool call arguments as JSON"
# when the history holds a cut-off call, a chat template's raise_exception such as
# "Conversation roles must alternate"); so does llama-cpp-python's server for a body
# its pydantic models reject ("7 validation errors: ...") or a template that reads a
# missing field ("'dict object' has no attribute 'content'"). A 5xx with one of these
# is not retried.
_DETERMINISTIC_PATTERNS = re.compile(
    r"failed to parse|parse error|json\.exception|tool call arguments|invalid tool call"
    r"|chat template|jinja|raise_exception|roles must alternate|not supported"
    r"|does not support tools|unsupported (value|parameter|param)|validation error"
    r"|has no attribute",
    re.IGNORECASE,
)
# Busy servers: Ollama's "server busy, please try again. maximum pending requests
# exceeded" (503, OLLAMA_MAX_QUEUE); vLLM and others say overloaded.
_BUSY_PATTERNS = re.compile(r"server busy|pending requests|overloaded|at capacity", re.IGNORECASE)
_CONTEXT_CODES = {
    "context_length_exceeded", "string_above_max_length", "context_too_long",
    "exceed_context_size_error",
}
_MODEL_CODES = {"model_not_found", "not_found_error", "invalid_model", "notfounderror"}
_AUTH_CODES = {"invalid_api_key", "authentication_error", "permission_error", "unauthorized"}
_RATE_CODES = {"rate_limit_exceeded", "rate_limit_error", "too_many_requests"}
_TRANSIENT_CODES = {
    "server_error", "api_error", "overloaded_error", "internal_error", "timeout",
    "unavailable_error",
}
# llama-server's type for a feature it lacks (HTTP 501): asking again will not add it.
_UNSUPPORTED_CODES = {"not_supported_error"}
# A quota that ran out is a 429 too, but waiting will not bring it back.
_QUOTA_CODES = {"insufficient_quota", "billing_hard_limit_reached"}


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_fields(payload: Any) -> tuple[str | None, str | None, str]:
    """(type, code, message) from an error body or event, whatever its shape.

    OpenAI: ``{"error": {"message", "type", "code"}}``; Anthropic:
    ``{"type": "error", "error": {"type", "message"}}``; Responses events put
    ``code``/``message`` at the top or under ``response.error``; some servers send
    ``{"error": "text"}`` or ``{"detail": ...}``.
    """
    if isinstance(payload, str):
        return None, None, payload
    if not isinstance(payload, dict):
        return None, None, json.dumps(payload)
    inner: Any = payload.get("error", payload)
    if isinstance(payload.get("response"), dict) and payload["response"].get("error"):
        inner = payload["response"]["error"]
    if isinstance(inner, str):
        return None, _str(payload.get("code")), inner
    if not isinstance(inner, dict):
        return None, None, json.dumps(payload)
    message = inner.get("message") or inner.get("detail") or payload.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message)
    kind = _str(inner.get("type"))
    if kind == "error":
        kind = None
    return kind, _str(inner.get("code")), message


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def classify(
    ctx: ErrorContext,
    *,
    status: int | None,
    payload: Any,
    headers: Mapping[str, str] | None = None,
    in_stream: bool = False,
) -> ProviderError:
    """The ``ProviderError`` for a failed response or an error event inside a stream."""
    headers = headers or {}
    kind, code, message = error_fields(payload)
    message = message.strip() or (f"HTTP {status}" if status else "unknown error")
    tags = {t.lower() for t in (kind, code) if t}
    where = f"{ctx.provider}: " if ctx.provider else ""
    suffix = f" (HTTP {status})" if status else ""
    detail = f"{message}{suffix}"

    if tags & _CONTEXT_CODES or _CONTEXT_PATTERNS.search(message):
        sizes = overflow_sizes(payload, message)
        return ContextOverflowError(
            f"{where}the request is longer than the context window of model {ctx.model!r}: "
            f"{detail}",
            status=status,
            context_window=sizes.context_window,
            prompt_tokens=sizes.prompt_tokens,
            excess_tokens=sizes.excess_tokens,
        )
    if status in (401, 403) or tags & _AUTH_CODES:
        return AuthenticationError(f"{where}authentication failed: {detail}. {_key_hint(ctx)}",
                                   status=status)
    if tags & _QUOTA_CODES:
        return BadRequestError(f"{where}quota exhausted: {detail}", status=status)
    if status == 429 or tags & _RATE_CODES:
        return RateLimitError(f"{where}rate limited: {detail}", status=status,
                              retry_after=parse_retry_after(headers))
    if _LOADING_PATTERNS.search(message):
        return TransientError(f"{where}the server is still loading the model: {detail}",
                              status=status, retry_after=parse_retry_after(headers))
    if status == 404 or tags & _MODEL_CODES or _MODEL_PATTERNS.search(message):
        where_url = f" at {ctx.base_url}" if ctx.base_url else ""
        return ModelNotFoundError(
            f"{where}model {ctx.model!r} not found{where_url}: {detail}. "
            f"{_model_hint(ctx, message)}",
            status=status,
        )
    if tags & _UNSUPPORTED_CODES or status == 501 or (
        status is not None and status >= 500 and _DETERMINISTIC_PATTERNS.search(message)
    ):
        return BadRequestError(
            f"{where}request refused: {detail}{_refusal_hint(message)}", status=status
        )
    if (status is not None and (status >= 500 or status in (408, 409, 425))) or (
        tags & _TRANSIENT_CODES
    ) or (status is None and in_stream and not tags):
        busy = "server busy" if _BUSY_PATTERNS.search(message) else "server error"
        err = TransientError(f"{where}{busy}: {detail}", status=status,
                             retry_after=parse_retry_after(headers))
        # The OpenAI and Anthropic SDKs honour this header; so do we.
        if headers.get("x-should-retry", "").lower() == "false":
            err.retryable = False
        return err
    return BadRequestError(f"{where}request refused: {detail}{_refusal_hint(message)}",
                           status=status)


def _model_hint(ctx: ErrorContext, message: str) -> str:
    """What to do about a missing model, in the words of the server that said so."""
    lowered = message.lower()
    if "try pulling" in lowered or ":11434" in ctx.base_url:
        return f"Download it with `ollama pull {ctx.model}`, or pick one `ollama list` shows."
    if "no models loaded" in lowered or "lms load" in lowered:
        return "Load a model in LM Studio (or with `lms load`), then try again."
    return "Check the model name (and the provider's base_url)."


def _refusal_hint(message: str) -> str:
    lowered = message.lower()
    if "tool call arguments" in lowered or "invalid tool call" in lowered:
        return (" (the conversation holds a tool call whose arguments are not valid JSON;"
                " sending it again would fail the same way)")
    if "does not support tools" in lowered:
        return " (this model has no tool calling: use a harness that reads calls from text)"
    return ""


def _key_hint(ctx: ErrorContext) -> str:
    if ctx.env_key:
        return f"Check the API key: set {ctx.env_key} to a valid key for {ctx.provider}."
    return f"Check the API key configured for {ctx.provider}."


def missing_key_error(provider: str, env_key: str) -> MissingKeyError:
    return MissingKeyError(
        f"{provider}: no API key: set {env_key} (the environment variable this provider "
        "reads its key from)",
        provider=provider,
        env_key=env_key,
    )


def parse_body(text: str) -> Any:
    """An error body as JSON where it is JSON, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()[:2000]
