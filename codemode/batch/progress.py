"""Progress of a batch run on stderr: done / failed / remaining.

On a terminal it is a live rich progress bar, with each failure printed above it as
it happens; otherwise (a pipe, a CI log) one plain line per finished repository.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from codemode.batch.models import RepoResult
from codemode.terminal.control_chars import echo


class BatchProgress:
    """Counts results as they arrive and shows them; use as a context manager."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        live: bool | None = None,
        verbose: bool = False,
    ) -> None:
        self.total = total
        self.verbose = verbose  # each repository's output and value under its line
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.done = 0
        self.failed = 0
        self.skipped = 0  # arguments that named no repository (not part of total)
        # Agent runs: what the finished repositories used, in all.
        self.tokens = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.requests = 0
        self.cost: float | None = None
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    @property
    def remaining(self) -> int:
        return self.total - self.done - self.failed

    def __enter__(self) -> BatchProgress:
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            from codemode.terminal.control_chars import safe_console

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn(
                    "[green]{task.fields[done]} done[/]  [red]{task.fields[failed]} failed[/]"
                    "  {task.fields[remaining]} remaining"
                ),
                TimeElapsedColumn(),
                console=safe_console(file=self.stream),
            )
            self._task = self._bar.add_task("batch", total=self.total, **self._fields())
            self._bar.start()
        return self

    def _fields(self) -> dict[str, int]:
        return {"done": self.done, "failed": self.failed, "remaining": self.remaining}

    def add(self, result: RepoResult) -> None:
        """Count one finished (or skipped) repository and show it."""
        if result.status == "skipped":
            self.skipped += 1
            line = f"skipped {result.repository}: {result.reason}"
            if self._bar is not None:
                from rich.text import Text  # lazy: rich, only for a progress bar

                self._bar.console.print(Text.assemble(("skipped", "yellow"), line[7:]))
            else:
                echo(line, file=self.stream)
            return
        self._count_usage(result)
        if result.ok:
            self.done += 1
        else:
            self.failed += 1
        if self._bar is not None:
            if not result.ok:
                from rich.text import Text  # lazy: rich, only for a progress bar

                # A Text, not markup: paths and messages may hold square brackets.
                failed = Text.assemble(("failed", "red"), f" {result.repository}: {result.error}")
                self._bar.console.print(failed, highlight=False)
            if self.verbose:
                from rich.text import Text  # lazy: rich, only for a progress bar

                self._bar.console.print(Text(self._details(result)), highlight=False)
            self._bar.update(self._task, advance=1, **self._fields())
        else:
            finished = self.done + self.failed
            width = len(str(self.total))
            line = (
                f"[{finished:>{width}}/{self.total}] {result.status:<6} "
                f"{result.duration_s:6.2f}s  {result.repository}"
            )
            if not result.ok:
                line += f": {result.error}"
            if self.verbose:
                line += "\n" + self._details(result)
            # Paths, error messages and output come from outside: shown, not obeyed.
            echo(line, file=self.stream)

    @staticmethod
    def _details(result: RepoResult) -> str:
        """-v: the repository, its console output and its return value, indented."""
        import json

        lines = [f"── {result.repository}"]
        lines += [f"  {line}" for line in (result.output or "").splitlines()]
        if result.value is not None:
            value = result.value if isinstance(result.value, str) else json.dumps(
                result.value, ensure_ascii=False
            )
            lines.append(f"  → {value}")
        return "\n".join(lines)

    def _count_usage(self, result: RepoResult) -> None:
        self.tokens += result.tokens
        self.input_tokens += result.input_tokens or 0
        self.output_tokens += result.output_tokens or 0
        self.requests += result.model_requests or 0
        if result.cost_usd is not None:
            self.cost = (self.cost or 0.0) + result.cost_usd

    def usage_line(self) -> str:
        """Agent runs: the model requests, tokens and cost of the whole batch."""
        line = (
            f"model: {self.requests} requests, {self.input_tokens} input + "
            f"{self.output_tokens} output tokens"
        )
        return line + (f", ${self.cost:.4f}" if self.cost is not None else "")

    def summary(self, dropped: dict[str, int] | None = None) -> str:
        """One closing line: counts, what was skipped or filtered out, wall-clock time."""
        elapsed = time.monotonic() - self.started
        text = (
            f"{self.total} repositories: {self.done} done, {self.failed} failed, "
            f"{self.remaining} not run"
        )
        if self.skipped:
            text += f", {self.skipped} skipped (not a repository)"
        for name, count in (dropped or {}).items():
            text += f", {count} dropped by --{name}"
        return f"{text} ({elapsed:.1f} s)"

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
