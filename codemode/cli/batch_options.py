"""The batch options of `interpreter run` and `interpreter exec --repos`, and the one
door from them to ``codemode.batch`` (``run_batch_usage``).

Only click is imported here: `interpreter --help` must stay fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

BATCH_ONLY = (
    "jobs", "report", "backend", "ray_address", "allow_empty", "include", "exclude",
    "contains", "only_failed", "branch", "commit_message", "author", "push", "pull_request",
)  # fmt: skip


def spread_repos(args: list[str]) -> list[str]:
    """``--repos A B C`` as ``--repos A --repos B --repos C``.

    A shell glob (``--repos ~/src/r*``) expands to several words; click would take the
    first as the option's value and hand the rest to the script as ``argv``. So every
    word after ``--repos`` belongs to it, up to an option or ``--``: a plain file or a
    missing path among them is then a ``--repos`` value that fails by name, never a
    script argument that silently ends the list (and takes the repositories after it
    along). Script arguments (and ``exec``'s PROMPT) go before ``--repos`` or after
    ``--``.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        out.append(word)
        i += 1
        if word == "--":
            out.extend(args[i:])
            break
        if word == "--repos" and i < len(args):
            out.append(args[i])  # the option's own value, a FILE or a DIR
            i += 1
        elif not word.startswith("--repos="):
            continue
        while i < len(args) and not args[i].startswith("-"):
            out.extend(["--repos", args[i]])
            i += 1
    return out


class BatchCommand(click.Command):
    """`interpreter run`: ``--repos`` takes every directory that follows it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_repos(args))


def batch_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add --repos, --jobs, --report, --dry-run, --backend, --ray-address and the
    selection, resume and publish options."""
    options = [
        click.option(
            "--repos",
            multiple=True,
            # (existence is checked with the rest, to name the path and say where script
            # arguments go: ``codemode.batch.repos``)
            type=click.Path(path_type=Path),
            metavar="FILE|DIR",
            help="Run the script in many repositories: a FILE lists one path per line; a "
            "DIR is one working copy, or holds them as subdirectories. Takes several "
            "(--repos ~/src/r*): every word after it, up to an option or `--`; script "
            "arguments (exec: the PROMPT) go before --repos or after `--`.",
        ),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(min=1),
            help="Repositories run at once (default: the CPU count).",
        ),
        click.option(
            "--report",
            type=click.Path(dir_okay=False, path_type=Path),
            help="JSON Lines report, one line per repository "
            "(default: $CODEMODE_HOME/batch/codemode-batch-DATE-TIME.jsonl).",
        ),
        click.option(
            "--dry-run",
            is_flag=True,
            default=None,
            help="Write no file: print the unified diff of what would change (with "
            "--repos, put it in the report); the shell tool is refused.",
        ),
        click.option(
            "--backend",
            type=click.Choice(["local", "ray"]),
            help="local: a process pool on this machine (default); ray: a Ray cluster.",
        ),
        click.option(
            "--ray-address",
            metavar="ADDRESS",
            help="Ray cluster to use (ray://HOST:10001, HOST:6379 or auto; "
            "default: start a local instance).",
        ),
        click.option(
            "--allow-empty",
            is_flag=True,
            default=None,
            help="Exit 0 even when a --repos argument names no repository (it is still "
            "reported as skipped) or the filters leave none.",
        ),
        click.option(
            "--include",
            multiple=True,
            metavar="GLOB",
            help="Only repositories whose name (or, for a GLOB with '/', whole path) "
            "matches; repeatable.",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="GLOB",
            help="Leave out repositories whose name (or path) matches; repeatable.",
        ),
        click.option(
            "--contains",
            metavar="REGEX",
            help="Only repositories where some file matches REGEX (Python syntax).",
        ),
        click.option(
            "--resume",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            metavar="REPORT",
            help="Run the repositories that did not finish ok in REPORT (same script, "
            "checked by hash), appending to it; no --repos.",
        ),
        click.option(
            "--only-failed",
            is_flag=True,
            default=None,
            help="With --resume: only the repositories that failed (not those never run).",
        ),
        click.option(
            "--branch",
            metavar="NAME",
            help="Publish: commit each changed repository's changes on a new branch NAME "
            "(host git, hooks off) and switch to it; needs --commit-message.",
        ),
        click.option("--commit-message", metavar="MSG", help="The commit message for --branch."),
        click.option(
            "--author",
            metavar="'NAME <EMAIL>'",
            help="Author (and committer) of --branch commits (default: git's configured user).",
        ),
        click.option(
            "--push",
            metavar="REMOTE",
            help="Push each --branch to REMOTE (a remote name or URL); a failed push "
            "fails the repository and leaves it as it was.",
        ),
        click.option(
            "--pull-request",
            is_flag=True,
            default=None,
            help="After --push, open a pull request (gh) or merge request (glab) for each "
            "pushed branch; a failure fails the repository (untested against the real "
            "services).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def refuse_without_repos(given: dict[str, Any]) -> None:
    """Batch-only options make no sense for a single run: say so instead of ignoring them."""
    used = [name for name in (*BATCH_ONLY, *AGENT_ONLY) if given.get(name) not in (None, ())]
    if used:
        flags = ", ".join("--" + name.replace("_", "-") for name in used)
        verb = "applies" if len(used) == 1 else "apply"
        raise click.UsageError(f"{flags} only {verb} to batch runs: add --repos FILE|DIR")


AGENT_ONLY = ("token_budget", "total_token_budget", "price")


def _price(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        per_input, per_output = (float(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter("expected INPUT,OUTPUT: USD per million tokens") from None
    return (per_input, per_output)


def agent_batch_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the options of an agent-driven batch (exec --repos): budgets and price."""
    options = [
        click.option(
            "--token-budget",
            type=click.IntRange(min=1),
            help="With --repos: stop a repository's session (it fails, its changes are "
            "dropped) once it has used this many tokens (input + output).",
        ),
        click.option(
            "--total-token-budget",
            type=click.IntRange(min=1),
            help="With --repos: start no further repository once the finished ones have "
            "used this many tokens; --resume the report to go on.",
        ),
        click.option(
            "--price",
            metavar="IN,OUT",
            callback=_price,
            help="With --repos: USD per million input and output tokens, to report cost.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def run_batch_usage(source: str, args: tuple[str, ...], **options: Any) -> int:
    """``codemode.batch.command.run_batch_command``, its BatchUsageError reported as a
    usage error (exit 2)."""
    from codemode.batch.command import run_batch_command
    from codemode.batch.runner import BatchUsageError

    try:
        return run_batch_command(source, args, **options)
    except BatchUsageError as exc:
        raise click.UsageError(str(exc)) from None
