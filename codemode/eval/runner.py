"""One task, run once in one cell (harness and dialect): a fresh copy of its workspace,
a real session against the configured provider, the task's check at the end."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.eval.check import run_check
from codemode.eval.report import RunRecord
from codemode.eval.suite import Task
from codemode.hostfs.removal import remove_tree

if TYPE_CHECKING:
    from codemode.config import Config
    from codemode.providers.base import ModelRequest, Provider, StreamEvent, WireApi


@dataclass(frozen=True)
class Cell:
    harness: str
    code: bool

    @property
    def dialect(self) -> str:
        return "code" if self.code else "classic"


@dataclass(frozen=True)
class Prices:
    """US$ per million tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


class TimedProvider:
    """The configured provider, timing how long the session waits for it."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.waited_s = 0.0

    @property
    def wire(self) -> WireApi:
        return self.inner.wire

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        # Only the time spent inside the wire's stream counts: the session may stop
        # reading at the final event and leave this generator unfinished.
        events = aiter(self.inner.stream(request))
        while True:
            started = time.perf_counter()
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            finally:
                self.waited_s += time.perf_counter() - started
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run_task(
    task: Task,
    cell: Cell,
    repeat: int,
    *,
    config: Config,
    provider: str | None,
    model: str | None,
    max_turns: int,
    prices: Prices | None = None,
) -> RunRecord:
    """Run ``task`` once; never raises for the model's or the task's failures."""
    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session

    record = RunRecord(task=task.name, harness=cell.harness, dialect=cell.dialect,
                       repeat=repeat, ok=False)
    with _workspace_folder(task.name) as tmp:
        root = tmp / "workspace"
        root.mkdir()
        task.setup(root)
        options = SessionOptions(cwd=root, provider=provider, model=model,
                                 harness=cell.harness, code_mode=cell.code,
                                 max_turns=max_turns, approval_policy="never",
                                 sandbox_mode="workspace-write")
        started = time.perf_counter()
        timed: TimedProvider | None = None
        rejected: str | None = None
        try:
            session = build_session(config, options, SessionSpec(record=False))
            session.provider = timed = TimedProvider(session.provider)
            try:
                result = await session.run_turn(task.prompt)
                if result.ok:
                    # In the session's sandbox: the check reads (and may run) what the
                    # model wrote.
                    rejected = await run_check(session.runner.context.sandbox,
                                               task.folder / "verify.py", root)
            finally:
                await session.aclose()
        except Exception as exc:  # a run that could not start or died: counted, not fatal
            record.error_kind, record.error = "crashed", f"{type(exc).__name__}: {exc}"
            record.wall_s = time.perf_counter() - started
            return record
        record.wall_s = time.perf_counter() - started
        record.model_s = timed.waited_s
        record.model_requests = result.model_requests
        record.input_tokens = result.usage.input_tokens
        record.output_tokens = result.usage.output_tokens
        if prices is not None:
            record.cost = prices.cost(record.input_tokens, record.output_tokens)
        if not result.ok:
            record.error_kind, record.error = result.stop_reason, result.error
            return record
        if rejected is not None:  # the task's check refused the workspace
            record.error_kind, record.error = "wrong_result", rejected
            return record
        record.ok = True
        return record


@contextlib.contextmanager
def _workspace_folder(name: str) -> Iterator[Path]:
    """A fresh private folder for one run, removed afterwards however the model left it
    (a tree too deep for ``rmtree``, folders made read-only: ``remove_tree``)."""
    path = Path(tempfile.mkdtemp(prefix=f"codemode-eval-{name}-"))
    try:
        yield path
    finally:
        remove_tree(path)
