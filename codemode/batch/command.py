"""`interpreter run SCRIPT --repos ...`: from parsed options to a batch run."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from codemode.batch.models import OUTPUT_CHARS, AgentTask, now_iso
from codemode.batch.report import ReportError, RunHeader, default_report_path
from codemode.batch.repos import RepoListError, Skipped, select_repositories
from codemode.batch.runner import EXIT_FAILED, EXIT_OK, BatchOptions, BatchUsageError, run_batch
from codemode.js_runtime.models import Limits
from codemode.terminal.control_chars import echo

if TYPE_CHECKING:
    from codemode.batch.publish import PublishOptions
    from codemode.sandbox.settings import SandboxSettings


def run_batch_command(
    source: str,
    args: tuple[str, ...],
    *,
    script: str = "",
    engine: str = "quickjs",
    timeout: float = 300.0,
    memory: int = 512,
    max_tool_calls: int = 100_000,
    repos: tuple[Path, ...],
    jobs: int | None,
    report: Path | None,
    dry_run: bool | None,
    backend: str | None,
    ray_address: str | None,
    sandbox: SandboxSettings | None = None,
    verbose: bool = False,
    agent: AgentTask | None = None,
    total_token_budget: int | None = None,
    **selection: Any,
) -> int:
    """`interpreter run SCRIPT --repos ...` with the script's text (or, with ``agent``,
    `interpreter exec --repos ... PROMPT` with the prompt): returns the exit status."""
    if ray_address and backend != "ray":
        raise click.UsageError("--ray-address needs --backend ray")
    from codemode.batch.precheck import syntax_error

    if agent is None and (error := syntax_error(source)) is not None:
        echo(f"{error.one_line()} (no repository was run)", err=True)
        return EXIT_FAILED
    script_sha = hashlib.sha256(source.encode()).hexdigest()
    resume: Path | None = selection.get("resume")
    publish = _publish_options(selection, bool(dry_run))
    filters = _filters(selection)
    skipped: list[Skipped] = []
    dropped: dict[str, int] = {}
    if resume is not None:
        if repos:
            raise click.UsageError("--resume takes the repositories from the report: drop --repos")
        if report is not None and report.resolve() != resume.resolve():
            raise click.UsageError("--resume appends to the report it resumes: drop --report")
        from codemode.batch.resume import to_resume

        try:
            repositories, first = to_resume(resume, script_sha, bool(selection.get("only_failed")))
        except ReportError as exc:
            raise click.UsageError(str(exc)) from None
        repos_args = first.repos
        if not repositories:
            which = "failed" if selection.get("only_failed") else "left to finish"
            echo(f"{resume}: no repository {which}; nothing to run", err=True)
            return EXIT_OK
        report = resume
    else:
        if selection.get("only_failed"):
            raise click.UsageError("--only-failed goes with --resume REPORT")
        try:
            chosen = select_repositories(repos)
        except RepoListError as exc:
            raise click.UsageError(str(exc)) from None
        from codemode.batch.select import FilterError, apply_filters

        try:
            repositories, dropped = apply_filters(chosen.repositories, filters)
        except FilterError as exc:
            raise click.UsageError(str(exc)) from None
        skipped = chosen.skipped
        repos_args = [str(r) for r in repos]
    from codemode.version import package_version

    header = RunHeader(
        version=package_version(),
        script=script if agent is None else "(prompt)",
        script_sha256=script_sha,
        arguments=list(args),
        repos=repos_args,
        repositories=[str(r) for r in repositories],
        skipped=len(skipped),
        filters=filters.as_dict(),
        dropped=dropped,
        backend="ray" if backend == "ray" else "local",
        jobs=jobs or os.cpu_count() or 1,
        dry_run=bool(dry_run),
        publish=None if publish is None else {
            "branch": publish.branch, "push": publish.push, "author": publish.author,
            "pull_request": publish.pull_request,
        },
        resumed_from=str(resume) if resume else None,
        started_at=now_iso(),
    )  # fmt: skip
    options = BatchOptions(
        repositories=repositories,
        report=report or default_report_path(),
        jobs=header.jobs,
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
        skipped=skipped,
        allow_empty=bool(selection.get("allow_empty")),
        dropped=dropped,
        publish=publish,
        header=header,
        append=resume is not None,
        agent=agent,
        total_token_budget=total_token_budget,
    )
    from codemode.batch.report import ReportUnwritable

    try:
        return run_batch(source, options)
    except (BatchUsageError, ReportUnwritable) as exc:
        raise click.UsageError(str(exc)) from None


def _filters(selection: dict[str, Any]) -> Any:
    from codemode.batch.select import Filters

    return Filters(
        include=list(selection.get("include") or ()),
        exclude=list(selection.get("exclude") or ()),
        contains=selection.get("contains"),
    )


def _publish_options(selection: dict[str, Any], dry_run: bool) -> PublishOptions | None:
    branch, message = selection.get("branch"), selection.get("commit_message")
    author, push = selection.get("author"), selection.get("push")
    pull_request = bool(selection.get("pull_request"))
    if branch is None:
        for name, value in (("--commit-message", message), ("--author", author), ("--push", push),
                            ("--pull-request", selection.get("pull_request"))):  # fmt: skip
            if value is not None:
                raise click.UsageError(f"{name} goes with --branch NAME")
        return None
    if pull_request:
        from codemode.batch.pull_request import installed

        if not push:
            raise click.UsageError("--pull-request needs --push REMOTE (the branch it proposes)")
        if not installed():
            raise click.UsageError("--pull-request needs gh (GitHub) or glab (GitLab) on PATH")
    if not message:
        raise click.UsageError("--branch needs --commit-message MSG")
    if dry_run:
        raise click.UsageError("--branch publishes changes; a --dry-run makes none")
    from codemode.batch.publish import PublishOptions, parse_author

    if author is not None:
        try:
            parse_author(author)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    return PublishOptions(
        branch=branch, message=message, author=author, push=push, pull_request=pull_request
    )
