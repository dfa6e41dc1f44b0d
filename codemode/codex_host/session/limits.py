"""What one client of the code-mode host may hold at once (docs/codex-host.md, "Bounds").

Every session, cell and connection costs this process memory and, for a cell, an engine
worker process: with no bound, one client (any local user, on TCP) could hold them without
end. What is over a bound is refused with a clear message (gRPC ``RESOURCE_EXHAUSTED``;
an error answered in place on the framed protocol) and nothing else changes.

Its own module, importing nothing heavy: the command line reads these options before
it starts the engine worker.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

DEFAULT_MAX_SESSIONS = 16
DEFAULT_MAX_CELLS = 16
DEFAULT_MAX_CONNECTIONS = 8
# Cells one connection holds at once across its sessions: each keeps an engine worker
# process (up to --memory-mb of heap), and --max-sessions times --max-cells was 256 of
# them for one client; this is four sessions' worth.
DEFAULT_MAX_CONNECTION_CELLS = 64


class ClientBounds(NamedTuple):
    """Per client; cells per session are ``SessionLimits.max_cells`` (``session/runtime.py``)."""

    max_sessions: int = DEFAULT_MAX_SESSIONS  # open at once on one connection
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # TCP clients served at once
    max_connection_cells: int = DEFAULT_MAX_CONNECTION_CELLS  # across one connection's sessions


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


# The output one connection's cells hold for its client at once, across its sessions:
# the items of its programs it has not been given yet (``session/execution.py``). Each
# cell's own bound (64 Mi characters) let 16 sessions of 16 cells hold 16 GiB (64 GiB in
# astral characters). Its own account, not ``HELD_FOR_CLIENT``'s: output is the normal
# payload, and one cell's ordinary output (64 MiB of ASCII) would leave no room there for
# the tool calls and notifications a client must see to get on; four such cells fit here.
#
# Measured in bytes of this process's memory, not characters: a str costs 1, 2 or 4
# bytes a character by its widest one (``sys.getsizeof``, which is O(1)), and each item
# ``OUTPUT_EACH`` more (its record and its place in a list).
OUTPUT_FOR_CLIENT = 256 << 20
OUTPUT_EACH = 128


def output_cost(text: str) -> int:
    """What an item whose text (or image URL) is ``text`` costs the host to keep."""
    return sys.getsizeof(text) + OUTPUT_EACH


# The tool lists one connection's sessions keep by catalog revision (``session/catalog.py``),
# across its sessions. A session keeps 8 revisions and a request may carry 4 MiB of tools,
# so 16 sessions held 512 MiB for one client without it: a revision a client may name
# later is a promise of memory, kept only while it fits. Codex's lists are tens of KB.
CATALOGS_FOR_CLIENT = 64 << 20
CATALOG_EACH = 256  # a tool's record and its place in its list


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


class ConnectionCells:
    """What one connection's cells hold across its sessions: how many there are (each
    keeps an engine worker), and its account of ``OUTPUT_FOR_CLIENT``."""

    __slots__ = ("catalogs", "cells", "max_cells", "output")

    def __init__(self, max_cells: int = DEFAULT_MAX_CONNECTION_CELLS) -> None:
        self.max_cells = max_cells
        self.cells = 0  # started, their end not yet reported (as ``admit_cell`` counts)
        self.output = 0  # bytes (``output_cost``)
        self.catalogs = 0  # bytes of kept catalog revisions (``session/catalog.py``)

    def admit(self) -> None:
        if self.cells >= self.max_cells:
            raise LimitReached(
                f"this connection holds {self.cells} cells across its sessions, its limit "
                f"(--max-cells-per-connection {self.max_cells}): wait for one to finish "
                "or terminate one first"
            )

    def fits(self, cost: int) -> bool:
        """Whether an item of ``cost`` bytes may be kept (else it is dropped, counted)."""
        return self.output + cost <= OUTPUT_FOR_CLIENT

    def charge(self, change: int) -> None:
        """What the cells hold changed by ``change`` bytes (negative: let go)."""
        self.output += change

    def keep_catalog(self, cost: int, freed: int) -> None:
        """Keep a catalog revision of ``cost`` bytes in place of ``freed`` bytes of
        others; ``LimitReached``, nothing changed, past ``CATALOGS_FOR_CLIENT``."""
        after = self.catalogs - freed + cost
        if after > CATALOGS_FOR_CLIENT:
            raise LimitReached(
                f"this connection's sessions keep {self.catalogs} bytes of tool catalog "
                f"revisions, and this one is {cost} more (the limit: {CATALOGS_FOR_CLIENT}): "
                "send the tools without a revision, or close a session first"
            )
        self.catalogs = after
