"""The options several commands share: the workspace (``-C``), config overrides
(``-c``, also before the command name), and the agent-session and Codex ``exec`` sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from codemode.cli.sandbox_options import sandbox_options

ENGINE_CHOICES = ("quickjs", "v8")

# A command function being decorated (or a command, for click's own decorators).
F = TypeVar("F", bound=Callable[..., Any])


def cwd_option(help: str) -> Callable[[F], F]:
    """``-C/--cwd/--cd DIR`` (an existing directory, default: the current one)."""
    return click.option(
        "-C",
        "--cwd",
        "--cd",
        "cwd",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=".",
        help=help,
    )


GROUP_OVERRIDES = "codemode.group_overrides"


def _with_group_overrides(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """``-c`` given before the command name, then the command's own (which win)."""
    return (*ctx.meta.get(GROUP_OVERRIDES, ()), *value)


def config_option() -> Callable[[F], F]:
    """``-c/--config KEY=VALUE`` (repeatable): override a key of the config file."""
    return click.option(
        "-c",
        "--config",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_with_group_overrides,
        help="Override a config key (dotted for tables; VALUE is TOML or a plain string).",
    )


def load_config_or_usage(overrides: tuple[str, ...] | list[str]) -> Any:
    """The configuration, or a usage error (exit 2) naming what is wrong with it."""
    from codemode.config import ConfigError, load_config

    try:
        return load_config(list(overrides))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def session_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every agent command shares (exec, resume, and later the interactive one)."""
    options = [
        click.option("-m", "--model", help="Model name, as the provider spells it."),
        click.option("--provider", help="Provider from the catalog or [model_providers.NAME]."),
        click.option(
            "--code-mode/--classic",
            "code_mode",
            default=None,
            help="Code dialect (one exec tool running JavaScript) or classic tool calls; "
            "default: config `code_mode`, else classic.",
        ),
        click.option(
            "--harness",
            help="Harness (prompt and tool surface; `interpreter harness list`); default: "
            "the one of the provider's model family (claude-code for Anthropic, kimi-code "
            "for Kimi, qwen-code for Qwen, zcode for GLM), else native.",
        ),
        cwd_option("Workspace (default: current directory)."),
        click.option(
            "--max-turns",
            type=click.IntRange(min=1),
            help="Most model requests in one turn before it stops.",
        ),
        config_option(),
        click.option("--json", "as_json", is_flag=True, help="Print JSON Lines events."),
        click.option("--experimental-json", "as_json", is_flag=True, hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return sandbox_options(fn)


def codex_exec_options(fn: F) -> F:
    """The Codex ``exec`` options the Codex SDK passes (see codemode/agent/codex_compat.py)."""
    options = [
        click.option(
            "--add-dir",
            "add_dirs",
            multiple=True,
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="Another directory the tools may write in (repeatable).",
        ),
        click.option(
            "--skip-git-repo-check",
            is_flag=True,
            help="Accepted for Codex compatibility; codemode never requires a git repository.",
        ),
        click.option(
            "--output-schema",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="JSON Schema the final answer must satisfy (it is checked, with one retry).",
        ),
        click.option(
            "-i",
            "--image",
            "images",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Attach an image to the prompt (repeatable).",
        ),
        click.option("--last", is_flag=True, help="With resume: continue the newest session."),
        click.option(
            "--trust-project-hooks",
            is_flag=True,
            help="Run the workspace's hooks even if nobody trusted them here (for "
            "automation that checked them elsewhere; docs/hooks.md).",
        ),
        # Passed by some SDK versions; nothing to do with them here.
        click.option("--thread-source", hidden=True),
        click.option("--cyber-access-program", hidden=True),
        click.option("--color", hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn
