"""Starting a coroutine by hand, so that its first step runs now rather than when a
Task gets to it, and carrying it on later in a Task exactly as ``await`` would.

The runtime starts nested calls' handlers this way (``nested.py``): most finish
without waiting on I/O, and those then cost no Task and no trip through the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")


class Resumed(Coroutine[object, object, T], Generic[T]):
    """``coro``, already stepped by hand and waiting on ``waiting_on``, as a coroutine
    for a Task to carry on (``asyncio.ensure_future(Resumed(coro, waiting_on))``).

    The Task's first step hands it ``waiting_on``, as if ``coro`` had just yielded it.
    A Task cancelled before that first step would throw into ``coro`` without ever
    having seen ``waiting_on``, so nobody would cancel it: ``throw`` does, as a Task
    cancels the future it waits on. (Left pending, an executor future finishing later
    with an exception prints "Future exception was never retrieved".)
    """

    def __init__(self, coro: Coroutine[object, object, T], waiting_on: object) -> None:
        self._coro = coro
        self._waiting_on = waiting_on
        self._started = False

    def send(self, value: object) -> object:
        if not self._started:
            self._started = True
            return self._waiting_on
        return self._coro.send(value)

    def throw(
        self,
        exc: type[BaseException] | BaseException,
        val: object = None,
        tb: TracebackType | None = None,
    ) -> object:
        if not self._started:
            self._started = True
            if isinstance(self._waiting_on, asyncio.Future):
                self._waiting_on.cancel()
        if val is None and tb is None:
            return self._coro.throw(exc)
        if isinstance(exc, type):
            return self._coro.throw(exc, val, tb)  # the old three-argument form
        if val is not None:  # as the coroutine's own throw answers this
            raise TypeError("instance exception may not have a separate value")
        return self._coro.throw(exc, None, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[object, object, T]:
        value: object = None
        error: BaseException | None = None
        while True:
            try:
                yielded = self.throw(error) if error is not None else self.send(value)
            except StopIteration as finished:
                result: T = finished.value
                return result
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # thrown in by whoever awaits us: pass it on
                value, error = None, exc


def resume(coro: Coroutine[object, object, T], waiting_on: object) -> Resumed[T]:
    """Carry on ``coro``, which was stepped by hand and is waiting on ``waiting_on``."""
    return Resumed(coro, waiting_on)
