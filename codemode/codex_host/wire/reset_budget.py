"""How many streams a client may reset before they are answered: the rapid-reset attack
(CVE-2023-44487), where each reset RPC was work begun and the stream limit never binds.

A token bucket: ``BURST`` resets, then ``RATE`` a second. A client that cancels now and
then never comes near it; one that opens streams only to reset them is doing nothing
else, and loses its connection (``h2_connection.Connection``)."""

from __future__ import annotations

import time

BURST, RATE = 200, 100.0


class ResetBudget:
    """One connection's resets: ``spend`` one, and whether it was within the budget."""

    __slots__ = ("allowance", "at")

    def __init__(self) -> None:
        self.allowance, self.at = float(BURST), time.monotonic()

    def spend(self) -> bool:
        now = time.monotonic()
        self.allowance = min(BURST, self.allowance + (now - self.at) * RATE) - 1
        self.at = now
        return self.allowance >= 0
