"""Code sessions over a tool registry, for the runtime's tests: programs run through the
runtime's one API (``CodeSession``) with the registry's path for every nested call
(``RegistryDelegate``), as ``ToolHost`` and ``interpreter run`` run them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codemode.host.program_delegate import RegistryDelegate
from codemode.js_runtime import CodeSession, Completed, ExecEvent, ExecResult, Limits
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry


def registry_session(
    registry: ToolRegistry,
    workspace: Path,
    *,
    engine: str = "quickjs",
    limits: Limits | None = None,
    persistent: bool = False,
    on_event: Callable[[ExecEvent], None] | None = None,
    **kw: Any,
) -> CodeSession:
    """A session whose programs see ``registry``'s tools and call them in a context
    rooted at ``workspace``; every event its programs send goes to ``on_event``. Not
    persistent unless asked: each program gets a fresh isolate."""
    sink = None if on_event is None else (lambda _cell, event: on_event(event))
    return CodeSession(
        RegistryDelegate(registry, ToolContext(workspace=workspace), sink),
        tools=registry,
        engine=engine,
        limits=limits,
        persistent=persistent,
        **kw,
    )


async def run_program(session: CodeSession, source: str, **kw: Any) -> ExecResult:
    """Run ``source`` in ``session`` to its end (no yield time) and give its result."""
    outcome = await session.execute(source, **kw)
    assert isinstance(outcome, Completed), outcome  # no yield time: it ran to its end
    return outcome.result


@contextmanager
def loop_ticks(period: float) -> Iterator[list[float]]:
    """The times at which a task on the running event loop woke, every ``period`` s,
    while the block ran: too few of them, or a long gap between two, is the loop held."""
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(period)

    task = asyncio.ensure_future(tick())
    try:
        yield ticks
    finally:
        task.cancel()
