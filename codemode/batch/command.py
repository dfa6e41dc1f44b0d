"""`interpreter run SCRIPT --repos ...`: from parsed options to a batch run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.batch.models import OUTPUT_CHARS
from codemode.batch.report import default_report_path
from codemode.batch.repos import RepoListError, find_repositories
from codemode.batch.runner import EXIT_FAILED, BatchOptions, BatchUsageError, run_batch
from codemode.control_chars import echo
from codemode.js_runtime.models import Limits

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings


def run_batch_command(
    source: str,
    args: tuple[str, ...],
    *,
    engine: str,
    timeout: float,
    memory: int,
    max_tool_calls: int,
    repos: tuple[Path, ...],
    jobs: int | None,
    report: Path | None,
    dry_run: bool | None,
    backend: str | None,
    ray_address: str | None,
    sandbox: SandboxSettings | None = None,
    verbose: bool = False,
) -> int:
    """`interpreter run SCRIPT --repos ...` with the script's text: returns the exit status."""
    if ray_address and backend != "ray":
        raise click.UsageError("--ray-address needs --backend ray")
    try:
        repositories = find_repositories(repos)
    except RepoListError as exc:
        raise click.UsageError(str(exc)) from None
    from codemode.batch.precheck import syntax_error

    if (error := syntax_error(source)) is not None:
        echo(f"{error.one_line()} (no repository was run)", err=True)
        return EXIT_FAILED
    options = BatchOptions(
        repositories=repositories,
        report=report or default_report_path(),
        jobs=jobs or os.cpu_count() or 1,
        backend="ray" if backend == "ray" else "local",
        ray_address=ray_address,
        dry_run=bool(dry_run),
        engine=engine,
        limits=Limits(
            timeout_s=timeout,
            memory_mb=memory,
            max_tool_calls=max_tool_calls,
            output_chars=OUTPUT_CHARS,
        ),
        argv=list(args),
        sandbox=sandbox,
        verbose=verbose,
    )
    try:
        return run_batch(source, options)
    except BatchUsageError as exc:
        raise click.UsageError(str(exc)) from None
