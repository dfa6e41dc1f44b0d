"""The provider catalog: which services codemode knows, read from ``catalog.toml``, and
``open_provider`` to get a streaming client for one of them."""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Any

from codemode.providers.base import AuthenticationError, Provider
from codemode.providers.errors import missing_key_error
from codemode.providers.provider_info import ProviderInfo

__all__ = ["ProviderInfo", "builtin_providers", "open_provider", "provider_info",
           "resolve_api_key"]


@lru_cache(maxsize=1)
def _catalog() -> dict[str, dict[str, Any]]:
    text = resources.files("codemode.providers").joinpath("catalog.toml").read_text("utf-8")
    return tomllib.loads(text)


def builtin_providers() -> dict[str, ProviderInfo]:
    """The built-in providers by name (fresh objects: callers may change them)."""
    return {
        name: ProviderInfo.model_validate({"name": name, **entry})
        for name, entry in _catalog().items()
    }


def provider_info(
    name: str, override: dict[str, Any] | None = None, notices: list[str] | None = None
) -> ProviderInfo:
    """The provider ``name``: its catalog entry (if any) with the user's table over it.

    Raises KeyError for a name neither knows, ValueError for a bad table.
    """
    entry = _catalog().get(name)
    override = dict(override or {})
    if entry is None and not override:
        raise KeyError(name)
    # A table's own `name` is Codex's display name; ours is the catalog key.
    display = override.pop("name", None)
    if isinstance(display, str) and display and "description" not in override:
        override["description"] = display
    return ProviderInfo.from_table({**(entry or {}), **override, "name": name}, notices)


def resolve_api_key(info: ProviderInfo, api_key: str | None = None) -> str | None:
    """The key to send: ``api_key`` if given, else the key variable's value, else the
    table's ``experimental_bearer_token``; None when none is needed.

    Raises AuthenticationError naming the variable when it is needed and unset.
    """
    if api_key:
        return api_key
    variable = info.key_variable
    value = os.environ.get(variable, "").strip() if variable else ""
    if value:
        return value
    if info.experimental_bearer_token:
        return info.experimental_bearer_token
    if not variable:
        return None
    error = missing_key_error(info.name or info.base_url, variable)
    if info.env_key_instructions:
        raise AuthenticationError(f"{error}. {info.env_key_instructions.strip()}")
    raise error


def open_provider(
    info: ProviderInfo,
    *,
    api_key: str | None = None,
    timeout_s: float = 600,
    connect_timeout_s: float = 10,
) -> Provider:
    """A streaming client for ``info`` on its wire (no request is sent yet)."""
    key = resolve_api_key(info, api_key)
    if info.stream_idle_timeout_ms is not None:
        # httpx's read timeout is the longest silence between two chunks.
        timeout_s = info.stream_idle_timeout_ms / 1000
    common: dict[str, Any] = {
        "name": info.name or info.base_url,
        "base_url": info.base_url,
        "api_key": key,
        "env_key": info.key_variable,
        "headers": info.all_headers(),
        "query_params": info.query_params,
        "timeout_s": timeout_s,
        "connect_timeout_s": connect_timeout_s,
    }
    provider: Any
    if info.wire_api == "responses":
        from codemode.providers.responses import ResponsesProvider

        provider = ResponsesProvider(**common)
    elif info.wire_api == "anthropic":
        from codemode.providers.anthropic import AnthropicProvider

        provider = AnthropicProvider(**common)
    else:
        from codemode.providers.chat import ChatProvider

        provider = ChatProvider(
            send_reasoning=info.send_reasoning, max_tokens_field=info.max_tokens_field, **common
        )
    if info.request_max_retries is not None or info.stream_max_retries is not None:
        from codemode.providers.retry import RetryPolicy

        default = RetryPolicy()
        provider.retry_policy = RetryPolicy(
            max_attempts=(info.request_max_retries if info.request_max_retries is not None
                          else default.max_attempts - 1) + 1,
            max_stream_retries=info.stream_max_retries,
        )
    return provider
