"""What one client of the code-mode host may hold at once (docs/codex-host.md, "Bounds").

Every session, cell and connection costs this process memory and, for a cell, an engine
worker process: with no bound, one client (any local user, on TCP) could hold them without
end. What is over a bound is refused with a clear message (gRPC ``RESOURCE_EXHAUSTED``;
an error answered in place on the framed protocol) and nothing else changes.

Its own module, importing nothing heavy: the command line reads these options before
it starts the engine worker.
"""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_MAX_SESSIONS = 16
DEFAULT_MAX_CELLS = 16
DEFAULT_MAX_CONNECTIONS = 8


class ClientBounds(NamedTuple):
    """Per client; cells per session are ``SessionLimits.max_cells`` (``session/runtime.py``)."""

    max_sessions: int = DEFAULT_MAX_SESSIONS  # open at once on one connection
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # TCP clients served at once


# What one client's sessions hold for it at once while it has not taken them: the inputs
# of tool calls it has not completed, and notifications its stream has not carried yet
# (gRPC) or it has not answered (framed). Each counts its bytes and ``HELD_EACH`` more
# (the objects around it): counts alone (4,096 notifications, 100,000 calls) let a
# program make the host hold a megabyte string thousands of times over.
HELD_FOR_CLIENT = 64 << 20
HELD_EACH = 1024


class HeldForClient:
    """One connection's account of ``HELD_FOR_CLIENT``, across its sessions."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = 0

    def take(self, size: int) -> int:
        """Hold ``size`` bytes more: what it costs (give it back with ``give``), or 0
        (nothing held) past the bound."""
        cost = size + HELD_EACH
        if self.held + cost > HELD_FOR_CLIENT:
            return 0
        self.held += cost
        return cost

    def give(self, cost: int) -> None:
        self.held -= cost

    def refusal(self) -> str:
        return (
            f"the client has not taken {self.held} bytes of tool calls and notifications "
            f"the host holds for it (its limit: {HELD_FOR_CLIENT})"
        )


class LimitReached(Exception):
    """A client asked for more than its bound allows (``RESOURCE_EXHAUSTED``)."""


def admit_session(open_now: int, bounds: ClientBounds) -> None:
    if open_now >= bounds.max_sessions:
        raise LimitReached(
            f"this connection has {open_now} sessions open, its limit "
            f"(--max-sessions {bounds.max_sessions}): close one first"
        )


def admit_cell(held_now: int, max_cells: int) -> None:
    """A session holds a cell from its start until its end is reported (a yielded cell
    keeps its engine worker all that time)."""
    if held_now >= max_cells:
        raise LimitReached(
            f"this session holds {held_now} cells, its limit (--max-cells {max_cells}): "
            "wait for one to finish or terminate one first"
        )
