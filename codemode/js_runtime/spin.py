"""Waiting for the other end of a pipe by polling it briefly before sleeping.

A tool-call round trip is a few tens of microseconds of work on each side; waking a
process that went to sleep on the pipe costs as much again (more on a virtual
machine, whose idle CPUs halt). Polling for a short while first saves that wake-up
when the other side answers quickly and a CPU is free for each of them.

On a busy machine polling does the opposite: it takes the CPU the other side needs.
So a ``Spinner`` only keeps polling while polling pays: when waits outlast their
budget (or the poller was descheduled midway) twice in a row, it stops polling for
the next waits, twice as many after each further miss, and tries again after that;
each wait that polling caught halves that number again. One miss alone does not back
off: on a virtual machine a stolen tick or a page fault makes one now and then, and
backing off there is what costs most, because each side then sleeps, wakes late, and
makes the other side's poll miss in turn. And a wait that skipped polling but was
answered within a millisecond ends the backoff (``woke``): the other end is quick, it
was only asleep too.

That alone still costs a busy machine: each probe after a backoff can take a CPU that
another task wanted, and there a wake-up is cheap anyway (no CPU sits halted, waiting
to be woken). So a ``Spinner`` given a ``RunQueue`` also does not poll while the
machine has more runnable tasks than CPUs (looked at every ``_BUSY_CHECK_S``: a read
of ``/proc/loadavg``'s running count). The wait sleeps then, as it would without any
of this.

Used by both ends of the engine worker pipe (``worker.py``, ``worker_process.py``);
anything else that waits on another process over a pipe can use it the same way: a
non-blocking read as ``ready``, then a blocking wait when ``wait`` says False.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# The longest gap between two polls that still means "we kept the CPU" (a virtual
# machine's stolen ticks and interrupts make gaps of tens of microseconds).
_PREEMPTED_S = 100e-6
# Misses in a row before polling backs off.
_MISSES = 2
# A wait that skipped polling and was answered sooner than this ends the backoff.
_NEAR_S = 1e-3
_MAX_SKIP = 256
# How often a RunQueue looks at the machine's runnable tasks again.
_BUSY_CHECK_S = 0.01


class RunQueue:
    """Whether the machine has more runnable tasks than CPUs right now, from the
    running count in ``/proc/loadavg`` (the caller counts among them), read again at
    most every ``_BUSY_CHECK_S``. Without that file: never busy."""

    def __init__(self, path: str = "/proc/loadavg", cpus: int | None = None) -> None:
        self._path = path
        self._fd: int | None = None
        self._cpus = cpus or os.cpu_count() or 1
        self._checked = float("-inf")
        self._busy = False

    def open(self) -> None:
        """Open the file now (a confined engine worker opens no file later); its
        descriptor is kept, and read again from its start each time."""
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._fd = -1

    def busy(self, now: float) -> bool:
        if now - self._checked < _BUSY_CHECK_S:
            return self._busy
        self._checked = now
        self.open()
        try:
            # "0.52 0.61 0.70 3/512 4242": the fourth field is running/total.
            fields = os.pread(self._fd if self._fd is not None else -1, 128, 0).split()
            running = int(fields[3].split(b"/")[0])
        except (OSError, IndexError, ValueError):
            running = 0
        self._busy = running > self._cpus
        return self._busy


# The one each process's pipe waits share.
RUN_QUEUE = RunQueue()


class Spinner:
    """Polls ``ready`` for up to ``budget_s`` while that keeps paying off."""

    def __init__(
        self,
        budget_s: float,
        clock: Callable[[], float] = time.perf_counter,
        busy: Callable[[float], bool] | None = None,
    ) -> None:
        self.budget_s = budget_s
        self._clock = clock
        self._busy = busy  # ``RunQueue.busy``: no polling while it says so
        self._skip = 0  # waits left that sleep at once
        self._backoff = 1
        self._missed = 0  # misses in a row
        self._slept_since: float | None = None  # when a wait that skipped polling began

    def wait(self, ready: Callable[[], object]) -> bool:
        """Whether ``ready()`` turned true within the budget (False: go and sleep, then
        call ``woke``)."""
        clock = self._clock
        if self._skip:
            self._skip -= 1
            self._slept_since = clock()
            return bool(ready())
        self._slept_since = None
        last = start = clock()
        if self._busy is not None and self._busy(start):
            return bool(ready())
        while not ready():
            now = clock()
            if now - start >= self.budget_s or now - last > _PREEMPTED_S:
                self._missed += 1
                if self._missed >= _MISSES:
                    self._skip = self._backoff
                    self._backoff = min(2 * self._backoff, _MAX_SKIP)
                return False
            last = now
        # Halved, not reset: on a busy machine an occasional quick answer should not
        # buy a run of polls that miss.
        self._backoff = max(1, self._backoff // 2)
        self._missed = 0
        return True

    def woke(self) -> None:
        """The sleep after a ``wait`` that said False is over. When that wait skipped
        polling (backed off) and the answer still came within ``_NEAR_S``, the other end
        is quick after all: the backoff ends. Without this both ends, once backed off,
        stay asleep for good: each one's rare poll waits for the other's wake-up, which
        on a virtual machine outlasts the budget, so every poll misses."""
        since = self._slept_since
        if since is not None and self._clock() - since < _NEAR_S:
            self._skip = 0
            self._backoff = 1
            self._missed = 0
