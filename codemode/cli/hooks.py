"""``interpreter hooks list|trust|disable``: the hooks a session here would run, and
the person's decisions about a project's hooks (docs/hooks.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.cli.options import config_option, cwd_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo, json_text, visible

if TYPE_CHECKING:
    from codemode.hooks.review import Review


@cli.group()
def hooks() -> None:
    """Hooks: your commands run around tool calls and at points of a session's life."""


def _review(cwd: Path, overrides: tuple[str, ...]) -> Review:
    from codemode.config import codemode_home
    from codemode.hooks.review import review

    config = load_config_or_usage(overrides)
    return review(cwd.resolve(), codemode_home(), config.hooks, config.hooks_from_other_agents)


@hooks.command("list")
@cwd_option("The workspace whose hooks to list (default: current directory).")
@config_option()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def hooks_list(cwd: Path, overrides: tuple[str, ...], as_json: bool) -> None:
    """Every hook found, with its number, state (trusted, untrusted, disabled), key,
    event, matcher, command and source. Exit status 1 when a hooks file has problems."""
    found = _review(cwd, overrides)
    if as_json:
        echo(json_text(found.as_json(), indent=2, ensure_ascii=False))
    else:
        for line in found.lines():
            echo(line)
        for line in found.problem_lines():
            echo(line, err=True)
    sys.exit(1 if found.problems else 0)


@hooks.command("trust")
@cwd_option("The workspace whose hooks to trust (default: current directory).")
@config_option()
@click.argument("names", nargs=-1, required=True)
def hooks_trust(cwd: Path, overrides: tuple[str, ...], names: tuple[str, ...]) -> None:
    """Let project hooks run: NAMES are numbers or keys from `interpreter hooks list`, or
    `all` (every one not trusted yet). Trust holds for the exact definition: a changed
    hook must be trusted again."""
    _decide(cwd, overrides, list(names), trust=True)


@hooks.command("disable")
@cwd_option("The workspace whose hooks to disable (default: current directory).")
@config_option()
@click.argument("names", nargs=-1, required=True)
def hooks_disable(cwd: Path, overrides: tuple[str, ...], names: tuple[str, ...]) -> None:
    """Stop hooks from running (yours or a project's); `trust` undoes it."""
    _decide(cwd, overrides, list(names), trust=False)


def _decide(cwd: Path, overrides: tuple[str, ...], names: list[str], *, trust: bool) -> None:
    found = _review(cwd, overrides)
    try:
        picked = found.pick(names)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    assert found.store is not None
    try:
        (found.store.trust if trust else found.store.disable)(picked)
    except OSError as exc:
        raise click.ClickException(f"cannot write {found.store.path}: {exc}") from None
    verb = "trusted" if trust else "disabled"
    for hook in picked:
        echo(visible(f"{verb}: {hook.key}  {hook.describe()}"))
        for line in found.trusted_lines(hook) if trust else ():
            echo(line)
    if not picked:
        echo("nothing to do: no project hook waits for trust")
