"""What the three wires' encoders share: text cut into streamed pieces, the usage
estimate, a tool call's argument text, the stop reason, and the default error messages."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from codemode.providers.base import Usage

if TYPE_CHECKING:
    from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply, ScriptedToolCall

# A server-sent event: its name (None: a data-only event) and its data.
Event = tuple[str | None, str]


def split_text(text: str, parts: int = 4) -> list[str]:
    """``text`` in several pieces (word-aligned where it can be), so streaming is real."""
    if len(text) <= 1:
        return [text] if text else []
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) < 2:
        half = len(text) // 2
        return [text[:half], text[half:]]
    size = max(1, -(-len(words) // parts))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def split_args(text: str, size: int = 12) -> list[str]:
    if not text:
        return []
    return [text[i : i + size] for i in range(0, len(text), size)]


def estimate_usage(request: RecordedRequest, reply: ScriptedReply) -> Usage:
    if reply.usage is not None:
        return reply.usage
    prompt = len(json.dumps(request.body))
    out = len(reply.text) + len(reply.reasoning)
    out += sum(len(c.name) + len(c.argument_text()) for c in reply.tool_calls)
    return Usage(
        input_tokens=prompt // 4 + 1,
        output_tokens=out // 4 + 1,
        reasoning_tokens=len(reply.reasoning) // 4,
    )


def _string_field(request: RecordedRequest, tool: str) -> str:
    """The single string property a freeform tool is offered with on a function wire."""
    for spec in request.body.get("tools") or []:
        fn = spec.get("function") or spec
        if fn.get("name") != tool:
            continue
        schema = fn.get("parameters") or fn.get("input_schema") or {}
        props = list((schema.get("properties") or {}).keys())
        if len(props) == 1:
            return str(props[0])
    return "input"


def call_arguments(request: RecordedRequest, call: ScriptedToolCall, wire: str) -> str:
    """The argument text of ``call`` on ``wire`` (freeform input wrapped in JSON where
    the wire has no freeform tools)."""
    if call.freeform and wire != "responses":
        return json.dumps({_string_field(request, call.name): call.argument_text()})
    return call.argument_text()


def stop_reason(reply: ScriptedReply) -> str:
    return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")


def error_status(reply: ScriptedReply) -> int:
    """The HTTP status an error reply stands for (500 for an error sent in a 200 stream)."""
    return reply.status if reply.status != 200 else 500


def error_message(wire: str, reply: ScriptedReply, request: RecordedRequest) -> str:
    if reply.error_message:
        return reply.error_message
    model = request.body.get("model", "")
    if reply.error_code == "context_length_exceeded":
        if wire == "anthropic":
            return "prompt is too long: 210000 tokens > 200000 maximum"
        return ("This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130000 tokens. Please reduce the length of the messages.")
    defaults = {
        401: "Incorrect API key provided.",
        403: "This key is not allowed to use this model.",
        404: f"The model `{model}` does not exist or you do not have access to it.",
        429: "Rate limit reached, please try again later.",
    }
    status = error_status(reply)
    return defaults.get(status, f"scripted error {status}")
