"""What the three wire clients share: construction, closing, and the function-shaped
fallback for freeform tools on wires that have no freeform tools."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from codemode.providers.base import ToolCall, ToolSpec, WireApi
from codemode.providers.transport import AuthStyle, Transport
from codemode.tool_terms.spec import function_parameters as function_parameters

if TYPE_CHECKING:
    import httpx

    from codemode.providers.retry import RetryPolicy


class WireProvider:
    """Base of the wire clients; ``stream`` is each wire's own."""

    wire: ClassVar[WireApi]
    auth_style: ClassVar[AuthStyle] = "bearer"
    # The provider's own retry settings (its config table's); None: the defaults.
    retry_policy: RetryPolicy | None = None

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None = None,
        env_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Mapping[str, str] | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.transport = Transport(
            provider=name,
            base_url=base_url,
            api_key=api_key,
            env_key=env_key,
            headers=headers,
            query_params=query_params,
            auth_style=self.auth_style,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            http_transport=http_transport,
        )

    def prepare(self) -> None:
        """(``Preparable``) What the first request needs, made ahead, on any thread:
        the transport's client, and the retrying stream every request goes through."""
        import codemode.providers.retry  # noqa: F401  (imported by the first request)

        self.transport.prepare()

    async def aclose(self) -> None:
        await self.transport.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"


def freeform_field(tools: Sequence[ToolSpec], name: str) -> str:
    for spec in tools:
        if spec.name == name and spec.freeform is not None:
            return spec.freeform.field
    return "input"


def json_arguments(call: ToolCall, tools: Sequence[ToolSpec]) -> str:
    """A call's arguments as JSON text, wrapping raw freeform input in its field."""
    if call.freeform:
        return json.dumps({freeform_field(tools, call.name): call.arguments})
    return call.arguments or "{}"


def arguments_object(call: ToolCall, tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """A call's arguments as a JSON object (Anthropic's ``tool_use.input`` must be one).

    Malformed JSON from the model is kept, wrapped, rather than dropped: the model sees
    in its own history what it sent.
    """
    if call.freeform:
        return {freeform_field(tools, call.name): call.arguments}
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {"_raw_arguments": call.arguments}
    return value if isinstance(value, dict) else {"_raw_arguments": call.arguments}
