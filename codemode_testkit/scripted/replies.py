"""What a script is made of and what it sees: the replies (``ScriptedReply``, with their
``ScriptedToolCall``s and faults) and the requests received (``RecordedRequest``).
Plain data that the script, the wire encoders and the tests all share."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codemode.providers.base import Usage


class ScriptedToolCall(BaseModel):
    # A misspelt field in a script is an error, not a silently different reply.
    model_config = ConfigDict(extra="forbid")

    name: str
    # A dict is sent as its JSON; a string is sent as is (malformed JSON included).
    arguments: str | dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    # The raw input of a freeform tool: a custom tool call on the Responses wire;
    # elsewhere a function call whose JSON wraps the text in the tool's single string
    # property (read from the request's tool schema).
    freeform: bool = False

    def argument_text(self) -> str:
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments)
        return self.arguments


class ScriptedReply(BaseModel):
    """One answer of the scripted model, and the faults of the attempt that gets it."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    # Default: a deterministic estimate from the request and reply sizes.
    usage: Usage | None = None
    # The neutral stop reason to report ("stop", "tool_calls", "length", ...); by
    # default "tool_calls" when there are tool calls, else "stop". "length" is each
    # wire's own form (finish_reason "length", stop_reason "max_tokens",
    # response.incomplete with reason "max_output_tokens").
    stop_reason: str | None = None
    # Faults. A status other than 200 answers with that error and no stream.
    status: int = 200
    error_message: str | None = None
    error_code: str | None = None  # e.g. "context_length_exceeded"
    # More fields of the error object, over the wire's own (llama-server's
    # {"type": "exceed_context_size_error", "n_ctx": 8192, "n_prompt_tokens": 9000}).
    error_fields: dict[str, Any] = Field(default_factory=dict)
    retry_after: float | None = None  # sent as a Retry-After header
    # Send the error as an event inside a 200 stream (after cut_after_events events).
    error_in_stream: bool = False
    cut_after_events: int | None = None  # send N events, then drop the connection
    end_after_events: int | None = None  # send N events, then end the body cleanly
    chunk_delay_s: float = 0.0  # sleep between events
    hang_s: float = 0.0  # sleep before the response headers


class RecordedRequest(BaseModel):
    wire: str  # "chat", "responses" or "anthropic"
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    query: str = ""  # the URL's query string, as sent
