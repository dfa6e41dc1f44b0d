"""Waiting for the other end of a pipe by polling it briefly before sleeping.

A tool-call round trip is a few tens of microseconds of work on each side; waking a
process that went to sleep on the pipe costs as much again (more on a virtual
machine, whose idle CPUs halt). Polling for a short while first saves that wake-up
when the other side answers quickly and a CPU is free for each of them.

On a busy machine polling does the opposite: it takes the CPU the other side needs.
So a ``Spinner`` only keeps polling while polling pays: when a wait outlasts its
budget (or the poller was descheduled midway), it stops polling for the next waits,
twice as many after each miss, and tries again after that; each wait that polling
caught halves that number again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The longest gap between two polls that still means "we kept the CPU".
_PREEMPTED_S = 30e-6
_MAX_SKIP = 256


class Spinner:
    """Polls ``ready`` for up to ``budget_s`` while that keeps paying off."""

    def __init__(self, budget_s: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.budget_s = budget_s
        self._clock = clock
        self._skip = 0  # waits left that sleep at once
        self._backoff = 1

    def wait(self, ready: Callable[[], object]) -> bool:
        """Whether ``ready()`` turned true within the budget (False: go and sleep)."""
        if self._skip:
            self._skip -= 1
            return bool(ready())
        clock = self._clock
        last = start = clock()
        while not ready():
            now = clock()
            if now - start >= self.budget_s or now - last > _PREEMPTED_S:
                self._skip = self._backoff
                self._backoff = min(2 * self._backoff, _MAX_SKIP)
                return False
            last = now
        # Halved, not reset: on a busy machine an occasional quick answer should not
        # buy a run of polls that miss.
        self._backoff = max(1, self._backoff // 2)
        return True
