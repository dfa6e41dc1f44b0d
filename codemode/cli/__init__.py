"""The `interpreter` command line: argument handling only; the work lives elsewhere.

One module per command group (``run``, ``tools``, ``session``, ``mcp`` ...), each
registering its commands on the root group of ``root``, with the formatting of what
it prints beside it; ``main`` is the entry point. Heavy modules (JavaScript engines,
pydantic models, HTTP clients) are imported inside the commands, so
`interpreter --help` stays fast.
"""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["run"]:
    # Before anything heavy: `interpreter run`'s engine worker boots meanwhile.
    from codemode.js_runtime.early import prestart_for

    prestart_for(sys.argv[1:])

import click

# Imported for their commands, which they register on `cli`.
from codemode.cli import (  # noqa: F401
    acp,
    doctor,
    eval,
    harness,
    mcp,
    models,
    patch,
    policy,
    run,
    session,
    skills,
    tools,
)
from codemode.cli.root import cli

__all__ = ["INTERNAL_ERROR_STATUS", "cli", "main"]


# An unexpected exception's exit status (sysexits' EX_SOFTWARE): not one a command
# gives for its own failures.
INTERNAL_ERROR_STATUS = 70


def main(argv: list[str] | None = None) -> None:
    from codemode.js_runtime.early import run_and_exit  # a fast exit after `run`

    run_and_exit(_main, argv)


def _main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit status 2, other click
    errors one line and their own status; an unexpected exception is one line naming
    the log file its traceback went to, never a traceback on the terminal."""
    from codemode.cli_crash import install_thread_hooks

    install_thread_hooks(argv if argv is not None else sys.argv[1:])
    try:
        status = cli.main(args=argv, prog_name="interpreter", standalone_mode=False)
    except click.UsageError as exc:
        if isinstance(exc, click.NoSuchOption):
            from codemode.cli_hints import near_options

            exc.possibilities = near_options(exc.option_name, exc.possibilities or [])
        name = exc.ctx.command_path if exc.ctx else "interpreter"
        click.echo(f"{name}: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        from codemode.cli_crash import one_line

        click.echo(f"interpreter: error: {one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`interpreter tools | head`): nothing left to say to it.
        _quiet_stdout()
        sys.exit(1)
    except Exception as exc:  # the last stop before a traceback
        from codemode.cli_crash import one_line, record_crash

        where = record_crash(exc, argv if argv is not None else sys.argv[1:])
        reason = one_line(f"{type(exc).__name__}: {exc}")
        click.echo(f"interpreter: internal error: {reason} (see {where})", err=True)
        sys.exit(INTERNAL_ERROR_STATUS)
    sys.exit(status if isinstance(status, int) else 0)


def _quiet_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
