"""The commands that run or list agent sessions: ``exec`` (one prompt to completion),
``resume`` and ``sessions``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from codemode.cli.batch_options import (
    BatchCommand,
    agent_batch_options,
    batch_options,
    refuse_without_repos,
    run_batch_usage,
)
from codemode.cli.options import codex_exec_options, session_options
from codemode.cli.root import _run_interactive, cli
from codemode.terminal.control_chars import echo


def _read_prompt(prompt: str | None) -> str | None:
    if prompt == "-" or (prompt is None and not sys.stdin.isatty()):
        # Bytes that are not UTF-8 become U+FFFD: a prompt is text for a model, and
        # neither a traceback nor an unencodable request helps.
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    return prompt


def _run_agent(**kwargs: Any) -> None:
    from codemode.commands.exec import ExecOptions, UsageProblem, run_exec
    from codemode.js_runtime import prestart

    # One turn, then the process exits: its programs run one after another in one
    # worker, so no spare boots behind it (a program beside another starts its own).
    prestart.one_program = True
    try:
        status = run_exec(ExecOptions(**kwargs))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


@cli.command("exec", cls=BatchCommand)
@click.argument("args", nargs=-1)
@session_options
@codex_exec_options
@click.option(
    "--replay",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay the model side of a recorded session (no network); tools run for real.",
)
@batch_options
@agent_batch_options
def exec_(
    args: tuple[str, ...],
    replay: Path | None,
    overrides: tuple[str, ...],
    add_dirs: tuple[Path, ...],
    images: tuple[Path, ...],
    last: bool,
    skip_git_repo_check: bool,
    thread_source: str | None,
    cyber_access_program: str | None,
    color: str | None,
    **kw: Any,
) -> None:
    """Run PROMPT to completion without asking anything: exec [PROMPT], or
    exec resume SESSION_ID [PROMPT] (or exec resume --last [PROMPT]) to continue a session.
    A PROMPT of -, or none with stdin not a terminal, is read from stdin.

    Progress goes to stderr, the final answer to stdout. Exit status: 0 done,
    1 the turn failed, 2 usage or configuration error, 130 interrupted.

    With --repos, one session per repository, in parallel, each in a copy of its
    repository whose changes are applied only when its turn completes; a JSON Lines
    report as for `interpreter run --repos`.
    """
    batch = _batch_arguments(kw)
    if batch["repos"] or batch["resume"] is not None:
        _run_agent_batch(args, replay, overrides, add_dirs, images, last, batch, kw)
        return
    if batch["dry_run"]:
        raise click.UsageError("--dry-run applies to exec only with --repos (a batch)")
    refuse_without_repos(batch)
    resume: str | None = None
    if args[:1] == ("resume",) and (len(args) > 1 or last):
        if last:
            resume, rest = "", args[1:]
        else:
            resume, rest = args[1], args[2:]
    else:
        if last:
            raise click.UsageError("--last goes with resume: exec resume --last [PROMPT]")
        rest = args
    if len(rest) > 1:
        raise click.UsageError(f"too many arguments: {' '.join(rest[1:])!r} (quote the PROMPT)")
    prompt = rest[0] if rest else None
    if replay is None:
        prompt = _read_prompt(prompt)
        if resume is not None and prompt is None:
            raise click.UsageError("pass a PROMPT to continue the session with")
    _run_agent(
        prompt=prompt,
        replay=replay,
        resume=resume,
        overrides=list(overrides),
        writable_roots=list(add_dirs),
        images=list(images),
        **kw,
    )


_BATCH_KEYS = (
    "repos", "jobs", "report", "dry_run", "backend", "ray_address", "allow_empty", "include",
    "exclude", "contains", "resume", "only_failed", "branch", "commit_message", "author", "push",
    "pull_request", "token_budget", "total_token_budget", "price",
)  # fmt: skip


def _batch_arguments(kw: dict[str, Any]) -> dict[str, Any]:
    return {key: kw.pop(key, None) for key in _BATCH_KEYS}


def _run_agent_batch(
    args: tuple[str, ...],
    replay: Path | None,
    overrides: tuple[str, ...],
    add_dirs: tuple[Path, ...],
    images: tuple[Path, ...],
    last: bool,
    batch: dict[str, Any],
    kw: dict[str, Any],
) -> None:
    """exec --repos ... PROMPT: one agent session per repository."""
    from codemode.batch.models import AgentTask

    unsupported = {"--replay": replay, "--add-dir": add_dirs, "--image": images, "--last": last,
                   "--json": kw.get("as_json"), "--output-schema": kw.get("output_schema")}
    used = [name for name, value in unsupported.items() if value]
    if used or args[:1] == ("resume",):
        what = ", ".join(used) or "exec resume"
        raise click.UsageError(f"{what}: not for batch runs (--repos)")
    if len(args) != 1:
        raise click.UsageError(
            "exec --repos ... takes one PROMPT (quote it), before --repos or after `--`: "
            "every word after --repos, up to an option or `--`, is a repository"
        )
    prompt = _read_prompt(args[0])
    if not prompt or not prompt.strip():
        raise click.UsageError("no prompt given")
    fields = ("model", "provider", "code_mode", "harness", "max_turns", "sandbox_mode",
              "approval_policy", "full_auto")  # fmt: skip
    options = {name: kw[name] for name in fields if kw.get(name) is not None}
    options["overrides"] = list(overrides)
    agent = AgentTask(
        prompt=prompt,
        options=options,
        token_budget=batch.pop("token_budget"),
        price=batch.pop("price"),
    )
    sys.exit(run_batch_usage(prompt, (), agent=agent, **batch))


@cli.command()
@click.argument("args", nargs=-1)
@click.option("--last", is_flag=True, help="Continue the most recent session.")
@session_options
def resume(args: tuple[str, ...], last: bool, overrides: tuple[str, ...], **kw: Any) -> None:
    """Continue a recorded session: resume SESSION_ID [PROMPT] or resume --last [PROMPT].

    The session keeps its file, model and dialect unless options override them. Without
    a PROMPT, in a terminal, the session reopens interactively.
    """
    if last:
        if len(args) > 1:
            raise click.UsageError("with --last, pass at most a PROMPT")
        ref, prompt = "", (args[0] if args else None)
    else:
        if not args:
            raise click.UsageError("pass a SESSION_ID or --last")
        ref, prompt = args[0], (args[1] if len(args) > 1 else None)
        if len(args) > 2:
            raise click.UsageError("too many arguments: resume SESSION_ID [PROMPT]")
    if prompt is None and sys.stdin.isatty():
        if kw.pop("as_json"):
            raise click.UsageError("--json needs a PROMPT (it is for non-interactive runs)")
        _run_interactive(
            prompt=None,
            resume=ref,
            overrides=overrides,
            **kw,
        )
    prompt = _read_prompt(prompt)
    if prompt is None:
        raise click.UsageError("pass a PROMPT to continue with (or run it in a terminal)")
    _run_agent(prompt=prompt, resume=ref, overrides=list(overrides), **kw)


@cli.command()
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many sessions to list.",
)
def sessions(limit: int) -> None:
    """List recorded sessions, newest first (ids for `interpreter resume`)."""
    from codemode.agent.rollout import SESSIONS_DIR, list_sessions
    from codemode.config import codemode_home

    rows = list_sessions(codemode_home() / SESSIONS_DIR)[:limit]
    if not rows:
        echo("no sessions recorded yet", err=True)
    for row in rows:
        echo(
            f"{row.id}  {row.model:<24} {row.dialect:<7} {row.cwd or '?'}  {row.first_prompt}"
        )
