"""Starting a coroutine by hand, so that its first step runs now rather than when a
Task gets to it, and carrying it on later exactly as ``await`` would.

The bridge starts tool handlers this way: most finish without waiting on I/O, and
those then cost no Task and no trip through the event loop.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Carry on ``coro``, which was stepped by hand and is waiting on ``waiting_on``."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as exc:
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as finished:
                return finished.value
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as finished:
                return finished.value
