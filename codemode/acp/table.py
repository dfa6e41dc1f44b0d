"""The open ACP sessions of one connection, and their bound (docs/acp.md, "Sessions").

Every open session holds an agent, a provider connection, a sandbox with its command
server, perhaps an engine worker and MCP servers: with no bound, a client that opens
sessions in a loop holds processes and memory without end. At most ``acp_max_sessions``
are open at once. A session past that closes the one least recently used that is not
running a turn, rather than being refused, because editors that never send
``session/close`` (most of them, before ACP stabilised it) would otherwise be locked out
after that many threads; a closed session that had a turn is recorded, and
``session/load`` continues it. When every open session is running a turn, the new one is
refused with ``SESSION_LIMIT`` and nothing changes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from acp import RequestError

# Implementation-defined JSON-RPC server error (-32000..-32099; ACP itself uses -32000
# and -32002): the client holds as many sessions as it may, all of them busy.
SESSION_LIMIT = -32010
# Closed session ids remembered, so that a request naming one says why it is gone.
_REMEMBERED = 1024


class Closable(Protocol):
    session_id: str

    @property
    def busy(self) -> bool: ...

    @property
    def recorded(self) -> bool:
        """Whether its session file exists (a session never prompted has none)."""
        ...


def invalid(message: str) -> RequestError:
    """Invalid params, with the specific problem as the error message."""
    return RequestError(-32602, message, {"message": message})


T = TypeVar("T", bound=Closable)


class SessionTable(Generic[T]):
    """Open sessions in order of last use, and the slots taken by sessions being opened."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, T] = OrderedDict()
        self._gone: OrderedDict[str, str] = OrderedDict()  # closed id -> why
        self._opening = 0

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._open

    def values(self) -> list[T]:
        return list(self._open.values())

    def find(self, session_id: str) -> T | None:
        return self._open.get(session_id)

    def use(self, session_id: str) -> T:
        """The open session ``session_id``, now the most recently used; else the error
        that says why there is none."""
        live = self._open.get(session_id)
        if live is None:
            why = self._gone.get(session_id)
            raise invalid(f"session {session_id!r} {why}" if why else f"no session {session_id!r}")
        self._open.move_to_end(session_id)
        return live

    def reserve(self, limit: int) -> T | None:
        """Take a slot for a session about to open: the idle session that makes room
        (already out of the table: the caller closes it), or None when there was room.
        Every slot is busy: ``SESSION_LIMIT``."""
        if len(self._open) + self._opening < limit:
            self._opening += 1
            return None
        for session_id, live in self._open.items():  # least recently used first
            if not live.busy:
                del self._open[session_id]
                then = (
                    "session/load continues it"
                    if live.recorded
                    else "it had no turn, so there is nothing to continue"
                )
                self._forget(
                    session_id,
                    f"was closed to make room: at most {limit} sessions are open at once "
                    f"(acp_max_sessions); {then}",
                )
                self._opening += 1
                return live
        message = (
            f"{len(self._open)} sessions are open, the limit (acp_max_sessions = {limit}), "
            "and each is running a turn: close one (session/close) or wait for a turn to end"
        )
        raise RequestError(SESSION_LIMIT, message, {"message": message, "limit": limit})

    def opened(self, live: T) -> None:
        """The session a reserved slot was for is open."""
        self._opening -= 1
        self._gone.pop(live.session_id, None)
        self._open[live.session_id] = live

    def release(self) -> None:
        """A reserved slot whose session did not open."""
        self._opening -= 1

    def close(self, session_id: str, why: str = "was closed") -> T | None:
        """Take ``session_id`` out (the caller closes it); None if it was not open."""
        live = self._open.pop(session_id, None)
        if live is not None:
            self._forget(session_id, why)
        return live

    def closed(self, session_id: str) -> bool:
        return session_id in self._gone

    def _forget(self, session_id: str, why: str) -> None:
        self._gone[session_id] = why
        while len(self._gone) > _REMEMBERED:
            self._gone.popitem(last=False)
