"""`interpreter run SCRIPT --repos ...`: from parsed options to a batch run."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    `interpreter exec --repos ... PROMPT` with the prompt): returns the exit status.

    Raises BatchUsageError for options that cannot work together (the CLI reports it as
    a usage error) before any repository is touched."""
    if ray_address and backend != "ray":
        raise BatchUsageError("--ray-address needs --backend ray")
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
    run_id: str | None = None  # a resumed run's: the one it continues
    if resume is not None:
        if repos:
            raise BatchUsageError("--resume takes the repositories from the report: drop --repos")
        if report is not None and report.resolve() != resume.resolve():
            raise BatchUsageError("--resume appends to the report it resumes: drop --report")
        from codemode.batch.resume import to_resume

        try:
            repositories, first = to_resume(resume, script_sha, bool(selection.get("only_failed")))
        except ReportError as exc:
            raise BatchUsageError(str(exc)) from None
        repos_args = first.repos
        run_id = first.run_id
        if not repositories:
            which = "failed" if selection.get("only_failed") else "left to finish"
            echo(f"{resume}: no repository {which}; nothing to run", err=True)
            return EXIT_OK
        report = resume
    else:
        if selection.get("only_failed"):
            raise BatchUsageError("--only-failed goes with --resume REPORT")
        try:
            chosen = select_repositories(repos)
        except RepoListError as exc:
            raise BatchUsageError(str(exc)) from None
        from codemode.batch.select import FilterError, apply_filters

        try:
            repositories, dropped = apply_filters(chosen.repositories, filters)
        except FilterError as exc:
            raise BatchUsageError(str(exc)) from None
        skipped = chosen.skipped
        repos_args = [str(r) for r in repos]
    _recover(repositories)
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
        run_id=run_id,
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
    except ReportUnwritable as exc:  # a report path that is a link, say: a usage error
        raise BatchUsageError(str(exc)) from None


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
                raise BatchUsageError(f"{name} goes with --branch NAME")
        return None
    if pull_request:
        from codemode.batch.pull_request import installed

        if not push:
            raise BatchUsageError("--pull-request needs --push REMOTE (the branch it proposes)")
        if not installed():
            raise BatchUsageError("--pull-request needs gh (GitHub) or glab (GitLab) on PATH")
    if not message:
        raise BatchUsageError("--branch needs --commit-message MSG")
    if dry_run:
        raise BatchUsageError("--branch publishes changes; a --dry-run makes none")
    from codemode.batch.publish import PublishOptions, parse_author

    if author is not None:
        try:
            parse_author(author)
        except ValueError as exc:
            raise BatchUsageError(str(exc)) from None
    return PublishOptions(
        branch=branch, message=message, author=author, push=push, pull_request=pull_request
    )


def _recover(repositories: list[Path]) -> None:
    """Roll back, in every repository, a write killed partway there (an earlier
    session's, a killed `interpreter run`'s) before any is copied, shipped or read:
    otherwise the half-written state is what the script starts from, and what its
    changes are applied over. Each line is said on stderr, naming its repository."""
    from codemode.batch.scratch import vanished_copy
    from codemode.tools.store.forget import forget
    from codemode.tools.store.recovery import recover_at_start

    for repo in repositories:

        def say(line: str, repo: Path = repo) -> None:
            echo(f"{repo}: {line}", err=True)

        recover_at_start(repo, say=say)
    # Journals a worker killed in its copy left, once that copy's scratch folder is gone
    forget(vanished_copy)
