"""Replaying the model's side of a recorded session against the real tools.

``ReplayProvider`` answers each request with the next assistant message from the
recording, streamed in pieces like a live model, so a recorded session runs again
with no network: the tools really run, in whatever workspace is given.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from codemode.agent.rollout import RecordedSession
from codemode.providers.base import (
    AssistantMessage,
    Completed,
    ModelRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    Usage,
    WireApi,
)

_CHUNK = 24  # characters per streamed text delta


class ReplayProvider:
    """A provider that plays back recorded replies in order."""

    name = "replay"  # assembly.session.REPLAY_PROVIDER: the name its sessions are recorded under

    def __init__(self, replies: list[tuple[AssistantMessage, Usage | None]]) -> None:
        self._replies = list(replies)
        self._next = 0
        self.wire: WireApi = next((m.wire for m, _ in replies if m.wire), "chat")

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        if self._next >= len(self._replies):
            raise ProviderError(
                f"replay: the recording has no more model replies (it had {len(self._replies)})"
            )
        message, usage = self._replies[self._next]
        self._next += 1
        for start in range(0, len(message.text), _CHUNK):
            yield TextDelta(text=message.text[start : start + _CHUNK])
        stop = "tool_calls" if message.tool_calls else "stop"
        yield Completed(message=message, usage=usage or Usage(), stop_reason=stop)

    async def aclose(self) -> None:
        return None


def replay_plan(recorded: RecordedSession) -> tuple[list[str], ReplayProvider]:
    """The prompts that started the recorded turns, in order, and a provider answering
    them with the recorded replies."""
    prompts = [recorded.messages[i].text for i in recorded.prompt_indexes]  # type: ignore[union-attr]
    replies = [
        (message, usage)
        for message, usage in zip(recorded.messages, recorded.usages, strict=True)
        if isinstance(message, AssistantMessage)
    ]
    return prompts, ReplayProvider(replies)
