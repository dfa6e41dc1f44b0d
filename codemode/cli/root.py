"""The root group: ``interpreter [OPTIONS] [PROMPT]`` starts an interactive session,
``interpreter COMMAND`` runs a command (the command modules register themselves on
``cli``)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from codemode.cli.options import GROUP_OVERRIDES, session_options

# The module of ``codemode.cli`` that registers each command on ``cli``. A command's
# module is imported when that command is looked up, all of them only when they are
# listed (``--help``, a mistyped name's suggestions): `interpreter run hello.js` does
# not import the other commands (acp, doctor, eval, ...). tests/test_cli_commands.py
# holds this table to what the modules register.
COMMAND_MODULES = {
    "acp": "acp",
    "apply-patch": "patch",
    "code-mode-host": "codex_host",
    "doctor": "doctor",
    "eval": "eval",
    "exec": "session",
    "harness": "harness",
    "hooks": "hooks",
    "mcp": "mcp",
    "mcp-server": "mcp",
    "models": "models",
    "policy": "policy",
    "providers": "models",
    "resume": "session",
    "run": "run",
    "sessions": "session",
    "skills": "skills",
    "tools": "tools",
    "warm": "warm",
}


def load_command_modules() -> None:
    """Import every command's module, so that ``cli.commands`` holds them all."""
    for module in sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"codemode.cli.{module}")


class _SessionGroup(click.Group):
    """A group whose first word is a subcommand if it names one, else the PROMPT of an
    interactive session (``interpreter "fix the bug"``). Commands are imported when
    first looked up (``COMMAND_MODULES``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        module = COMMAND_MODULES.get(cmd_name)
        if command is None and module is not None:
            importlib.import_module(f"codemode.cli.{module}")
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        load_command_modules()
        return super().list_commands(ctx)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # Called with the words after the group's options: a command name and its
        # arguments, or the words of a PROMPT, which the group's own callback runs
        # (invoked_subcommand None, PROMPT in ctx.meta).
        if ctx.resilient_parsing or self.get_command(ctx, args[0]) is not None:
            return super().resolve_command(ctx, args)
        words = list(args)
        if len(words) == 1:
            from codemode.terminal.hints import near_names

            close = [n for n in near_names(words[0], self.list_commands(ctx))
                     if not n.startswith(words[0]) or len(words[0]) >= 3]
            if close and words[0].isalpha():
                offer = " or ".join(f"`interpreter {n}`" for n in close[:3])
                raise click.UsageError(
                    f"{words[0]!r} is not a command; did you mean {offer}? (To ask "
                    "the model, start `interpreter` and type it at the prompt.)"
                )
        if any(w.startswith("-") for w in words[1:]):
            raise click.UsageError(
                "put options before the PROMPT: interpreter [OPTIONS] [PROMPT]"
            )
        ctx.meta["codemode.prompt"] = " ".join(words)
        return None, _PROMPT_WORDS, []


# What click invokes after the group's callback when the words were a PROMPT: nothing
# (that callback ran the session and exited).
_PROMPT_WORDS = click.Command("prompt", hidden=True)


@click.group(
    cls=_SessionGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    subcommand_metavar="[PROMPT] | COMMAND [ARGS]...",
)
@click.version_option(package_name="codemode", prog_name="interpreter")
@click.pass_context
def cli(ctx: click.Context, /, **kw: Any) -> None:
    """codemode: a coding agent where the model writes JavaScript against your tools.

    Without a command, starts an interactive session in the workspace (PROMPT, if
    given, is its first message). /help inside lists what it can do.
    """
    if ctx.invoked_subcommand is None:
        _run_interactive(prompt=ctx.meta.get("codemode.prompt"), **kw)
        return
    # `interpreter -c KEY=VALUE COMMAND`: the overrides apply to the command too (its
    # -c option adds them, see config_option); other session options before a command
    # would be silently lost, so they are an error.
    ctx.meta[GROUP_OVERRIDES] = tuple(kw.get("overrides") or ())
    given = [
        max(p.opts, key=len)
        for p in ctx.command.params
        if p.name in kw
        and p.name != "overrides"
        and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"put {', '.join(given)} after the command name: "
            f"interpreter {ctx.invoked_subcommand} [OPTIONS]"
        )


def _interactive_params() -> list[click.Parameter]:
    """exec's options (--sandbox/--approval/--full-auto included), less --json, in order."""

    def holder() -> None: ...

    # A throwaway command, for the options in the order `exec --help` shows them.
    return [p for p in click.command()(session_options(holder)).params if p.name != "as_json"]


cli.params.extend(_interactive_params())


def _run_interactive(*, overrides: tuple[str, ...], **kw: Any) -> None:
    from codemode.tui.app import InteractiveOptions, UsageProblem, run_interactive

    try:
        status = run_interactive(InteractiveOptions(overrides=list(overrides), **kw))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)
