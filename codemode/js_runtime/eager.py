"""Starting a coroutine by hand, so that its first step runs now rather than when a
Task gets to it, and carrying it on later in a Task exactly as ``await`` would.

The bridge starts tool handlers this way: most finish without waiting on I/O, and
those then cost no Task and no trip through the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


class Resumed(Coroutine[Any, Any, Any]):
    """``coro``, already stepped by hand and waiting on ``waiting_on``, as a coroutine
    for a Task to carry on (``asyncio.ensure_future(Resumed(coro, waiting_on))``).

    The Task's first step hands it ``waiting_on``, as if ``coro`` had just yielded it.
    A Task cancelled before that first step would throw into ``coro`` without ever
    having seen ``waiting_on``, so nobody would cancel it: ``throw`` does, as a Task
    cancels the future it waits on. (Left pending, an executor future finishing later
    with an exception prints "Future exception was never retrieved".)
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on: Any = waiting_on
        self._started = False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            return self._waiting_on
        return self._coro.send(value)

    def throw(self, exc: Any, val: Any = None, tb: Any = None) -> Any:
        if not self._started:
            self._started = True
            if isinstance(self._waiting_on, asyncio.Future):
                self._waiting_on.cancel()
        if val is None and tb is None:
            return self._coro.throw(exc)
        return self._coro.throw(exc, val, tb)  # the old three-argument form

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = self.throw(error) if error is not None else self.send(value)
            except StopIteration as finished:
                return finished.value
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # thrown in by whoever awaits us: pass it on
                value, error = None, exc


def resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Resumed:
    """Carry on ``coro``, which was stepped by hand and is waiting on ``waiting_on``."""
    return Resumed(coro, waiting_on)
