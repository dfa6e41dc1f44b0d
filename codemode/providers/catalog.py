"""The provider catalog: which services codemode knows, read from ``catalog.toml``, and
``open_provider`` to get a streaming client for one of them."""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codemode.providers.base import Provider, WireApi
from codemode.providers.errors import missing_key_error


class ProviderInfo(BaseModel):
    """One model service: where it is, how to authenticate, which wire it speaks.

    Every field but ``base_url`` has a default, so a user's ``[model_providers.NAME]``
    table can be as short as a base URL (a local server on the chat wire).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    description: str = ""
    base_url: str
    # Environment variable holding the API key; None (or "") means no key is needed.
    env_key: str | None = None
    wire_api: WireApi = "chat"
    family: str = "other"
    default_model: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Chat wire only: send an assistant message's reasoning back as reasoning_content
    # (DeepSeek and Kimi thinking modes need it on tool-calling steps).
    send_reasoning: bool = True
    # Chat wire only: the request field for the output limit.
    max_tokens_field: str = "max_tokens"
    # Sampling for this provider (codemode.providers.sampling): a catalog entry's
    # values are defaults, a user's [model_providers.NAME] values override the top level.
    max_output_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None

    @property
    def needs_key(self) -> bool:
        return bool(self.env_key)


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


def resolve_api_key(info: ProviderInfo, api_key: str | None = None) -> str | None:
    """The key to send: ``api_key`` if given, else ``$env_key``; None when none is needed.

    Raises AuthenticationError naming the variable when it is needed and unset.
    """
    if api_key:
        return api_key
    if not info.env_key:
        return None
    value = os.environ.get(info.env_key, "").strip()
    if not value:
        raise missing_key_error(info.name or info.base_url, info.env_key)
    return value


def open_provider(
    info: ProviderInfo,
    *,
    api_key: str | None = None,
    timeout_s: float = 600,
    connect_timeout_s: float = 10,
) -> Provider:
    """A streaming client for ``info`` on its wire (no request is sent yet)."""
    key = resolve_api_key(info, api_key)
    common: dict[str, Any] = {
        "name": info.name or info.base_url,
        "base_url": info.base_url,
        "api_key": key,
        "env_key": info.env_key or None,
        "headers": info.headers,
        "timeout_s": timeout_s,
        "connect_timeout_s": connect_timeout_s,
    }
    if info.wire_api == "responses":
        from codemode.providers.responses import ResponsesProvider

        return ResponsesProvider(**common)
    if info.wire_api == "anthropic":
        from codemode.providers.anthropic import AnthropicProvider

        return AnthropicProvider(**common)
    from codemode.providers.chat import ChatProvider

    return ChatProvider(
        send_reasoning=info.send_reasoning, max_tokens_field=info.max_tokens_field, **common
    )
