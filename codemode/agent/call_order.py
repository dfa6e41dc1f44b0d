"""The tool calls of one model reply, run in the order the model wrote them.

A reply may ask for several calls at once (parallel function calls, or several blocks of
a text-parsed harness). Calls that only read run together; a call that may change
anything (a write, a command, a program, a tool we know nothing about) waits for the
calls written before it, and the calls after it wait for it. So ``find`` then ``edit``
in one reply finds what was there before the edit, every time, as a model reading its
own reply top to bottom expects; and reads still overlap, as Codex runs them (its
read-only tools share a lock that a writing tool takes alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

C = TypeVar("C")
R = TypeVar("R")


async def run_in_order(
    calls: Sequence[C],
    execute: Callable[[C], Awaitable[R]],
    reads_only: Callable[[C], bool],
) -> list[R]:
    """``execute`` each call; runs of calls that ``reads_only`` run concurrently, any
    other call alone, in the calls' order. The outcomes come back in that order."""
    outcomes: list[R] = []
    at = 0
    while at < len(calls):
        end = at + 1
        if reads_only(calls[at]):
            while end < len(calls) and reads_only(calls[end]):
                end += 1
        outcomes += await asyncio.gather(*(execute(call) for call in calls[at:end]))
        at = end
    return outcomes
