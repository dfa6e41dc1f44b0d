"""The one seam between the agent and a model service: ``Provider``.

The agent speaks a small neutral conversation (``Message`` items, ``ToolSpec`` offers,
``StreamEvent`` results). Each wire module (chat completions, responses, anthropic
messages) translates that to and from its own JSON and SSE; nothing outside
``codemode.providers`` sees a wire's shapes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

# What the model is offered is a term the tools share (they build it, the wires send it):
# defined beside the tools' other terms, named here for the wires and the harnesses.
from codemode.tool_terms.spec import FreeformSpec as FreeformSpec
from codemode.tool_terms.spec import ToolSpec as ToolSpec

WireApi = Literal["chat", "responses", "anthropic"]


# --- the conversation ----------------------------------------------------------------


class ToolCall(BaseModel):
    id: str
    name: str
    # Exactly what the model sent: a JSON text for function calls (possibly malformed;
    # the harness repairs or reports it), the raw input for freeform calls.
    arguments: str
    freeform: bool = False


class ImageInput(BaseModel):
    """An image attached to a user message, carried inline (base64)."""

    mime_type: str
    data: str  # base64

    @property
    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.data}"


class UserMessage(BaseModel):
    role: Literal["user"] = "user"
    text: str
    images: list[ImageInput] = Field(default_factory=list)


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Wire-specific items that must be sent back verbatim on the same wire (Anthropic
    # thinking blocks with signatures, Responses reasoning items); ignored elsewhere.
    opaque: list[dict[str, Any]] = Field(default_factory=list)
    wire: WireApi | None = None


class ToolResultMessage(BaseModel):
    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    freeform: bool = False


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]


class ModelRequest(BaseModel):
    model: str
    instructions: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    # Sampling (None: the service's default). Each wire sends what it has a field for:
    # chat all four, responses all but seed, anthropic max_tokens and temperature (or
    # top_p when no temperature is set: newer Claude models refuse both together).
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    # A JSON Schema (strict-mode compatible) the final text must follow, for wires that
    # can enforce it (responses: text.format); others ignore it.
    output_schema: dict[str, Any] | None = None


# --- what comes back -----------------------------------------------------------------


class Usage(BaseModel):
    # All input tokens, cached or not (cached_input_tokens and cache_write_input_tokens
    # are shares of it).
    input_tokens: int = 0
    cached_input_tokens: int = 0
    # Input tokens written to the prompt cache (Anthropic's cache_creation_input_tokens).
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens
            + other.cache_write_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class TextDelta(BaseModel):
    kind: Literal["text"] = "text"
    text: str


class ReasoningDelta(BaseModel):
    kind: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallDelta(BaseModel):
    """Part of a tool call as it streams (lets a UI show code being written)."""

    kind: Literal["tool_call"] = "tool_call"
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class StreamRestarted(BaseModel):
    """The stream broke and the request is being sent again: drop the partial deltas."""

    kind: Literal["restarted"] = "restarted"
    attempt: int
    delay_s: float
    reason: str


class Completed(BaseModel):
    kind: Literal["completed"] = "completed"
    message: AssistantMessage
    usage: Usage
    # "stop", "tool_calls", "length", "content_filter" or what the wire said.
    stop_reason: str = "stop"


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | StreamRestarted | Completed


# --- errors --------------------------------------------------------------------------


class ProviderError(Exception):
    """A model request that failed; ``retryable`` says whether sending it again may help."""

    retryable = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class AuthenticationError(ProviderError):
    """401/403 or a missing key; the message names the environment variable to set."""


class MissingKeyError(AuthenticationError):
    """The provider needs a key and its environment variable is unset (found before any
    request): ``env_key`` names the variable, so a caller can ask for the key."""

    def __init__(self, message: str, *, provider: str, env_key: str) -> None:
        super().__init__(message)
        self.provider = provider
        self.env_key = env_key


class ModelNotFoundError(ProviderError):
    """The provider does not know the model name."""


class ContextOverflowError(ProviderError):
    """The request is longer than the model's context window; the sizes are the ones
    the error reported (None: it did not say)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        context_window: int | None = None,
        prompt_tokens: int | None = None,
        excess_tokens: int | None = None,
    ) -> None:
        super().__init__(message, status=status)
        self.context_window = context_window
        self.prompt_tokens = prompt_tokens
        self.excess_tokens = excess_tokens


class BadRequestError(ProviderError):
    """Any other 4xx the provider will keep refusing."""


class RateLimitError(ProviderError):
    retryable = True


class TransientError(ProviderError):
    """5xx, connection failures, timeouts and streams cut midway."""

    retryable = True


# --- the seam ------------------------------------------------------------------------


class Provider(Protocol):
    """A streaming client for one model service on one wire."""

    name: str

    @property
    def wire(self) -> WireApi:
        """Which wire the provider speaks (a class attribute of each wire client)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Send ``request``; yield deltas, then exactly one ``Completed``.

        Raises a ``ProviderError`` subclass on failure. Retrying is not done here
        (see ``codemode.providers.retry``), so one call is one HTTP request.
        """
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Preparable(Protocol):
    """A provider that can load what its first request needs ahead of it (the wire
    clients: httpx and a TLS context), on any thread, failing silently."""

    def prepare(self) -> None: ...
