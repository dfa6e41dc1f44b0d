"""One model request, streamed: its deltas and items become events as they arrive.

Text and reasoning deltas are shown live under one item id each, which the completed
items then reuse; a restarted stream is a notice; the completed reply is returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from codemode.agent.events import (
    AgentMessageItem,
    ItemCompleted,
    Notice,
    ReasoningDeltaEvent,
    ReasoningItem,
    TextDeltaEvent,
)
from codemode.agent.turn_result import TurnFailure
from codemode.providers.base import (
    AssistantMessage,
    Completed,
    ModelRequest,
    Provider,
    ReasoningDelta,
    StreamRestarted,
    TextDelta,
    Usage,
)

if TYPE_CHECKING:
    from codemode.providers.retry import RetryPolicy


async def stream_reply(
    provider: Provider,
    request: ModelRequest,
    retry_policy: RetryPolicy | None,
    emit: Callable[[BaseModel], None],
    next_id: Callable[[], str],
) -> tuple[AssistantMessage, Usage, str]:
    """Send ``request`` (retried as ``retry_policy`` says), ``emit`` what it streams, and
    return the reply, its usage and its stop reason."""
    from codemode.providers.retry import stream_with_retries

    text_id: str | None = None
    reasoning_id: str | None = None
    async for event in stream_with_retries(provider, request, retry_policy):
        if isinstance(event, TextDelta):
            text_id = text_id or next_id()
            emit(TextDeltaEvent(item_id=text_id, text=event.text))
        elif isinstance(event, ReasoningDelta):
            reasoning_id = reasoning_id or next_id()
            emit(ReasoningDeltaEvent(item_id=reasoning_id, text=event.text))
        elif isinstance(event, StreamRestarted):
            emit(
                Notice(
                    message=f"model request failed ({event.reason}); retrying in "
                    f"{event.delay_s:.1f}s (attempt {event.attempt})"
                )
            )
        elif isinstance(event, Completed):
            message = event.message
            if message.reasoning:
                item_id = reasoning_id or next_id()
                emit(ItemCompleted(item=ReasoningItem(id=item_id, text=message.reasoning)))
            if message.text:
                item_id = text_id or next_id()
                emit(ItemCompleted(item=AgentMessageItem(id=item_id, text=message.text)))
            if event.stop_reason == "length" and not message.tool_calls:
                emit(Notice(message="the reply was cut off by the output-token "
                                    "limit (max_output_tokens)"))
            return message, event.usage, event.stop_reason
    raise TurnFailure("the model stream ended without a complete reply")
