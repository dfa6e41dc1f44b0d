"""Server-sent events read from text as it arrives (the WHATWG event-stream rules): for
replies that ``plain_http`` reads, where httpx-sse (which needs an httpx response) is not
loaded. Lines end at CR LF, LF or CR; an empty line ends an event; ``:`` starts a
comment; an event with no ``event:`` field is a ``message``."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def events(text: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event, data) of each event in ``text``."""
    event, started, pending = "", False, ""
    data: list[str] = []
    async for piece in text:
        pending += piece
        # A CR at the very end may be the first half of a CR LF: kept for the next piece.
        cut = len(pending) - 1 if pending.endswith("\r") else len(pending)
        complete, pending = pending[:cut], pending[cut:]
        lines = complete.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        pending = lines.pop() + pending  # the unfinished last line
        for line in lines:
            if not line:
                if started:
                    yield event or "message", "\n".join(data)
                event, data, started = "", [], False
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event, started = value, True
            elif name == "data":
                data.append(value)
                started = True
            elif name in ("id", "retry"):
                started = True
