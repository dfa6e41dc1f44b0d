"""A batch run from start to end: repositories in, report and exit status out."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from codemode.batch.models import RepoResult, RepoTask
from codemode.batch.progress import BatchProgress
from codemode.batch.report import ReportWriter
from codemode.js_runtime.models import Limits

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings

Backend = Literal["local", "ray"]
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class BatchUsageError(ValueError):
    """Options that cannot work together, or a backend that cannot start."""


@dataclass
class BatchOptions:
    """How to run one script over many repositories."""

    repositories: list[Path]
    report: Path
    jobs: int = 1
    backend: Backend = "local"
    ray_address: str | None = None
    dry_run: bool = False
    engine: str = "quickjs"
    limits: Limits = field(default_factory=Limits)
    argv: list[str] = field(default_factory=list)
    sandbox: SandboxSettings | None = None
    # Show each repository's console output and return value as it finishes (-v).
    verbose: bool = False


def run_batch(source: str, options: BatchOptions, stream: TextIO | None = None) -> int:
    """Run ``source`` in every repository; returns the exit status (0 all ok, 1 any
    failed, 130 interrupted). Progress and the summary go to ``stream`` (stderr)."""
    stream = stream if stream is not None else sys.stderr
    if options.backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise BatchUsageError("--backend ray needs Ray: pip install 'codemode[ray]'")
    tasks = [
        RepoTask(
            repository=str(repo),
            source=source,
            engine=options.engine,
            limits=options.limits,
            argv=tuple(options.argv),
            dry_run=options.dry_run,
            sandbox=options.sandbox,
        )
        for repo in options.repositories
    ]
    with ReportWriter(options.report) as report, BatchProgress(
        len(tasks), stream, verbose=options.verbose
    ) as progress:

        def on_result(result: RepoResult) -> None:
            report.write(result)
            progress.add(result)

        try:
            _dispatch(tasks, options, on_result)
        except BatchUsageError:
            report.discard_if_empty()
            raise
        except KeyboardInterrupt:
            status = EXIT_INTERRUPTED
        else:
            status = EXIT_FAILED if progress.failed else EXIT_OK
    print(f"{progress.summary()}; report: {options.report}", file=stream, flush=True)
    if status == EXIT_INTERRUPTED:
        print("interrupted", file=stream)
    return status


def _dispatch(
    tasks: list[RepoTask], options: BatchOptions, on_result: Callable[[RepoResult], None]
) -> None:
    if options.backend == "ray":
        # lazy: Ray, only for --backend ray
        from codemode.batch.ray_backend import RayUnavailable, run_ray

        try:
            run_ray(tasks, options.jobs, on_result, options.ray_address)
        except RayUnavailable as exc:
            raise BatchUsageError(str(exc)) from None
    else:
        from codemode.batch.local import run_local

        run_local(tasks, options.jobs, on_result)
