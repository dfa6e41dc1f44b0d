"""A batch run from start to end: repositories in, report and exit status out.

The driver (this process) writes the report's header, a ``skipped`` line for every
argument that named no repository, then hands the repositories to a backend. As each
result comes back it is *settled* here: a successful run's journal is applied to the
repository all or nothing (``applying.apply``), and with ``--branch`` published
(``publish.py``); a failure at either step fails that repository and leaves it as it
was. Then the result is reported and counted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from codemode.batch.models import AgentTask, RepoResult, RepoTask
from codemode.batch.progress import BatchProgress
from codemode.batch.report import ReportWriter, RunHeader
from codemode.js_runtime.models import Limits
from codemode.terminal.control_chars import echo

if TYPE_CHECKING:
    from codemode.batch.publish import PublishOptions
    from codemode.batch.repos import Skipped
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
    # Arguments that named no repository: reported, and fail the run unless allow_empty.
    skipped: list[Skipped] = field(default_factory=list)
    allow_empty: bool = False
    # How many repositories each filter dropped, for the summary.
    dropped: dict[str, int] = field(default_factory=dict)
    publish: PublishOptions | None = None
    # The report's first line; None: a minimal one is made.
    header: RunHeader | None = None
    append: bool = False  # --resume: add to the report instead of replacing it
    # An agent session per repository (exec --repos): the "source" is then the prompt.
    agent: AgentTask | None = None
    # No repository is started once the finished ones have used this many tokens.
    total_token_budget: int | None = None


def run_batch(source: str, options: BatchOptions, stream: TextIO | None = None) -> int:
    """Run ``source`` in every repository; returns the exit status (0 all ok, 1 any
    failed or skipped, 130 interrupted). Progress and the summary go to ``stream``."""
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
            agent=options.agent,
        )
        for repo in options.repositories
    ]
    header = options.header or default_header(source, options)
    if not options.append:
        _record(header, options.report, stream)
    with ReportWriter(options.report, header, append=options.append) as report, BatchProgress(
        len(tasks), stream, verbose=options.verbose
    ) as progress:
        for skipped in options.skipped:
            line = skipped_result(skipped.path, skipped.reason)
            report.write(line)
            progress.add(line)

        def on_result(result: RepoResult) -> None:
            settle(result, options)
            report.write(result)
            progress.add(result)

        def spent() -> bool:
            budget = options.total_token_budget
            return budget is not None and progress.tokens >= budget

        try:
            _dispatch(tasks, options, on_result, spent)
        except BatchUsageError:
            report.discard_if_empty()
            raise
        except KeyboardInterrupt:
            status = EXIT_INTERRUPTED
        else:
            empty = progress.skipped > 0 or not tasks
            bad = progress.failed or (empty and not options.allow_empty)
            status = EXIT_FAILED if bad else EXIT_OK
    summary = f"{progress.summary(options.dropped)}; report: {options.report}"
    echo(summary, file=stream)
    if options.agent is not None:
        echo(progress.usage_line(), file=stream)
    if status != EXIT_INTERRUPTED and spent() and progress.remaining:
        echo(f"total token budget spent ({progress.tokens} of {options.total_token_budget}): "
             f"{progress.remaining} repositories not started (--resume the report to go on)",
             file=stream)  # fmt: skip
        status = EXIT_FAILED
    if status == EXIT_INTERRUPTED:
        echo("interrupted", file=stream)
    elif status == EXIT_FAILED and not progress.failed:
        echo("no repository failed, but some arguments named none (--allow-empty: exit 0)",
             file=stream)
    return status


def _record(header: RunHeader, report: Path, stream: TextIO) -> None:
    """Give a new run its id and record what it selected, for ``--resume``."""
    from codemode.batch.run_record import new_run_id, record_selection

    header.run_id = header.run_id or new_run_id()
    try:
        record_selection(header, report)
    except OSError as exc:
        echo(f"the run's selection could not be recorded ({exc}): its report cannot be "
             "resumed", file=stream)  # fmt: skip


def default_header(source: str, options: BatchOptions) -> RunHeader:
    """A header from the options alone (``command.py`` makes the full one)."""
    import hashlib

    from codemode.batch.models import now_iso
    from codemode.version import package_version

    return RunHeader(
        version=package_version(),
        script="",
        script_sha256=hashlib.sha256(source.encode()).hexdigest(),
        arguments=list(options.argv),
        repos=[],
        repositories=[str(r) for r in options.repositories],
        backend=options.backend,
        jobs=options.jobs,
        dry_run=options.dry_run,
        started_at=now_iso(),
    )


def skipped_result(path: Path, reason: str) -> RepoResult:
    from codemode.batch.models import now_iso

    when = now_iso()
    return RepoResult(
        repository=str(path), status="skipped", duration_s=0.0, tool_calls=0,
        reason=reason, started_at=when, ended_at=when, attempts=0,
    )  # fmt: skip


def settle(result: RepoResult, options: BatchOptions) -> None:
    """Apply (and publish) a finished repository's changes, or fail it cleanly."""
    journal, result.journal = result.journal, None
    if not result.ok or options.dry_run:
        return
    if not result.changed_files and options.publish is None:
        result.rolled_back = False
        return
    from codemode.batch.applying import apply
    from codemode.batch.changes import ApplyError

    repo = Path(result.repository)
    try:
        if options.publish is not None and journal:
            from codemode.batch.publish import PublishError, publish

            try:
                published = publish(repo, journal, options.publish)
            except PublishError as exc:
                _fail(result, "publish", str(exc))
                return
            result.branch, result.commit, result.pushed = (
                published.branch, published.commit, published.pushed
            )  # fmt: skip
            result.pull_request = published.pull_request
        elif journal:
            apply(repo, journal)
    except ApplyError as exc:
        _fail(result, "apply", str(exc))
        return
    result.rolled_back = False


def _fail(result: RepoResult, kind: Literal["apply", "publish"], message: str) -> None:
    result.status = "failed"
    result.error_kind = kind
    result.error = message
    result.rolled_back = True


def _dispatch(
    tasks: list[RepoTask],
    options: BatchOptions,
    on_result: Callable[[RepoResult], None],
    stop: Callable[[], bool],
) -> None:
    if not tasks:
        return
    if options.backend == "ray":
        # lazy: Ray, only for --backend ray
        from codemode.batch.ray_backend import RayUnavailable, run_ray

        try:
            run_ray(tasks, options.jobs, on_result, options.ray_address, stop=stop)
        except RayUnavailable as exc:
            raise BatchUsageError(str(exc)) from None
    else:
        from codemode.batch.local import run_local

        run_local(tasks, options.jobs, on_result, stop=stop)
