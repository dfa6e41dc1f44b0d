"""The wire encoders by name: what a reply looks like on the wire its request came in on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode_testkit.scripted import anthropic, chat, responses
from codemode_testkit.scripted.encoding import Event

if TYPE_CHECKING:
    from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply


@dataclass(frozen=True)
class WireEncoder:
    events: Callable[[RecordedRequest, ScriptedReply, int], Iterator[Event]]
    error_body: Callable[[ScriptedReply, RecordedRequest], dict[str, Any]]
    error_event: Callable[[ScriptedReply, RecordedRequest], Event]


WIRES = {
    "chat": WireEncoder(chat.events, chat.error_body, chat.error_event),
    "responses": WireEncoder(responses.events, responses.error_body, responses.error_event),
    "anthropic": WireEncoder(anthropic.events, anthropic.error_body, anthropic.error_event),
}


def _wire(name: str) -> WireEncoder:
    if name not in WIRES:
        raise ValueError(f"scripted server: unknown wire {name!r} (one of {', '.join(WIRES)})")
    return WIRES[name]


def render_events(
    wire: str, request: RecordedRequest, reply: ScriptedReply, seq: int
) -> Iterator[Event]:
    """The SSE events (name, data) of ``reply`` on ``wire``."""
    return _wire(wire).events(request, reply, seq)


def error_body(wire: str, reply: ScriptedReply, request: RecordedRequest) -> dict[str, Any]:
    """The JSON body of an error reply on ``wire``."""
    return _wire(wire).error_body(reply, request)


def error_event(wire: str, reply: ScriptedReply, request: RecordedRequest) -> Event:
    """An error reply sent as an event inside a 200 stream on ``wire``."""
    return _wire(wire).error_event(reply, request)
