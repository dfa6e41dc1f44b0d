"""One model service's settings: a built-in catalog entry, or a user's
``[model_providers.NAME]`` table over it.

The keys are Codex's and Open Interpreter's provider keys, so an existing table works
as it is: ``name``, ``base_url``, ``env_key``, ``env_key_instructions``,
``experimental_bearer_token``, ``wire_api`` (``chat``, ``responses`` or ``messages``;
``anthropic`` is our older name for ``messages``), ``query_params``, ``http_headers``,
``env_http_headers``, ``request_max_retries``, ``stream_max_retries``,
``stream_idle_timeout_ms`` and ``requires_openai_auth``. Keys for what this program
does not do (websockets) are accepted and named in a notice (``ignored_keys``); any
other unknown key is an error.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from codemode.providers.base import WireApi

# Codex keys accepted but without effect here, and why (shown in the notice).
IGNORED_KEYS = {
    "supports_websockets": "requests go over HTTP streams, not websockets",
    "websocket_connect_timeout_ms": "requests go over HTTP streams, not websockets",
}

# An HTTP header name (RFC 9110 token) and a value that cannot end the header early.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")

# The wire names a table may give, by the wire they mean.
_WIRE_NAMES = {"chat": "chat", "responses": "responses", "messages": "anthropic",
               "anthropic": "anthropic"}


class ProviderInfo(BaseModel):
    """One model service: where it is, how to authenticate, which wire it speaks.

    Every field but ``base_url`` has a default, so a user's ``[model_providers.NAME]``
    table can be as short as a base URL (a local server on the chat wire).
    """

    model_config = ConfigDict(extra="forbid")

    # The catalog name (a user table's own `name`, Codex's display name, becomes the
    # description when it has none).
    name: str = ""
    description: str = ""
    base_url: str
    # Environment variable holding the API key; None (or "") means no key is needed.
    env_key: str | None = None
    # Shown with the "no API key" error: where to get one.
    env_key_instructions: str | None = None
    # A key written in the config itself (Codex's name; env_key is the better place).
    experimental_bearer_token: str | None = Field(default=None, repr=False)
    wire_api: WireApi = "chat"
    family: str = "other"
    default_model: str | None = None
    # Extra HTTP headers sent with every request (http_headers is Codex's name; both
    # are sent, http_headers winning).
    headers: dict[str, str] = Field(default_factory=dict)
    http_headers: dict[str, str] = Field(default_factory=dict)
    # Header name -> environment variable: sent when the variable is set and not empty.
    env_http_headers: dict[str, str] = Field(default_factory=dict)
    # Added to every request URL (Azure's api-version).
    query_params: dict[str, str] = Field(default_factory=dict)
    # Sending a request again after a failure before any of the answer came, and
    # after a stream broke midway (Codex's defaults: 4 and 5; at most 100).
    request_max_retries: int | None = Field(default=None, ge=0, le=100)
    stream_max_retries: int | None = Field(default=None, ge=0, le=100)
    # A stream silent this long is treated as lost (and retried).
    stream_idle_timeout_ms: int | None = Field(default=None, gt=0)
    # Codex: the provider takes an OpenAI key (or a ChatGPT login, which this program
    # does not do); without env_key the key is read from OPENAI_API_KEY.
    requires_openai_auth: bool = False
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

    @field_validator("wire_api", mode="before")
    @classmethod
    def _wire_name(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in _WIRE_NAMES:
            return _WIRE_NAMES[value.strip().lower()]
        if isinstance(value, str):
            raise ValueError(
                f"unknown wire {value!r}: use 'chat' (Chat Completions), 'responses' "
                "(Responses) or 'messages' (Anthropic Messages; 'anthropic' also works)"
            )
        return value

    @field_validator("headers", "http_headers", "env_http_headers")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
            if _BAD_VALUE.search(text):
                raise ValueError(f"the value of header {name!r} has a line break or NUL")
        return value

    @property
    def needs_key(self) -> bool:
        return bool(self.key_variable)

    @property
    def key_variable(self) -> str | None:
        """The environment variable the key is read from, if one is needed."""
        if self.env_key:
            return self.env_key
        return "OPENAI_API_KEY" if self.requires_openai_auth else None

    def all_headers(self) -> dict[str, str]:
        """The extra headers to send: the fixed ones, then those from the environment."""
        out = {**self.headers, **self.http_headers}
        for header, variable in self.env_http_headers.items():
            value = os.environ.get(variable, "").strip()
            # Unset, empty or not sendable (a line break): left out, as Codex does.
            if value and not _BAD_VALUE.search(value):
                out[header] = value
        return out

    @classmethod
    def from_table(cls, data: dict[str, Any], notices: list[str] | None = None) -> ProviderInfo:
        """Validate a catalog entry merged with a user's table; keys without effect
        here are dropped, each with one line in ``notices``."""
        data = dict(data)
        label = f"[model_providers.{data.get('name') or '?'}]"
        for key in list(data):
            if key in IGNORED_KEYS:
                data.pop(key)
                if notices is not None:
                    notices.append(f"{label}: {key} is ignored ({IGNORED_KEYS[key]})")
        return cls.model_validate(data)
