"""The `interpreter` command line: argument handling only; the work lives elsewhere.

One module per command group (``run``, ``tools``, ``session``, ``mcp`` ...), each
registering its commands on the root group of ``root``, with the formatting of what
it prints beside it; ``main`` is the entry point. Heavy modules (JavaScript engines,
pydantic models, HTTP clients) are imported inside the commands, so
`interpreter --help` stays fast.
"""

from __future__ import annotations

import re
import sys
from typing import NoReturn

import click

from codemode.cli.root import cli
from codemode.terminal.control_chars import echo
from codemode.terminal.crash import INTERNAL_ERROR_STATUS

__all__ = ["EXIT_INTERRUPTED", "INTERNAL_ERROR_STATUS", "cli", "main"]

# Ctrl-C (or SIGINT) during any command: 128 + SIGINT, as shells report it.
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit status 2, other click
    errors one line and their own status; an unexpected exception is one line naming
    the log file its traceback went to, never a traceback on the terminal.

    A command that Ctrl-C stopped (status 130) ends without the interpreter's teardown
    (``process/fast_exit.py``: threads joined, atexit handlers run, streams flushed):
    freeing ~500 modules one by one took 100-350 ms beside two CPU burners, after the
    command had stopped, and Ctrl-C is to end a command within 200 ms (a command served
    warm ends so already)."""
    try:
        _main(argv)
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED:
            from codemode.process.fast_exit import exit_now, is_command_process

            if is_command_process():
                exit_now(EXIT_INTERRUPTED)
        raise


def _main(argv: list[str] | None) -> None:
    from codemode.process import entry
    from codemode.sandbox.confinement.grpc_fork import quiet_grpc_fork
    from codemode.terminal.crash import install_thread_hooks

    entry.claim()  # this process is the command's own (pyseccomp_import)

    quiet_grpc_fork()  # before anything loads gRPC (Ray, an embedder's code)
    install_thread_hooks(argv if argv is not None else sys.argv[1:])
    try:
        status = cli.main(args=argv, prog_name="interpreter", standalone_mode=False)
    except click.UsageError as exc:
        if isinstance(exc, click.NoSuchOption):
            from codemode.terminal.hints import near_options

            exc.possibilities = near_options(exc.option_name, exc.possibilities or [])
        name = exc.ctx.command_path if exc.ctx else "interpreter"
        echo(f"{name}: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        from codemode.terminal.crash import one_line

        echo(f"interpreter: error: {one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`interpreter tools | head`): nothing left to say to it.
        _quiet_stdout()
        sys.exit(1)
    except ModuleNotFoundError as exc:
        if (missing := _not_installed(exc)) is None:
            _crash(exc, argv)
        echo(
            f"interpreter: error: this needs the full install (no module {missing!r}): "
            "pip install 'codemode[agent]'",
            err=True,
        )
        sys.exit(1)
    except Exception as exc:  # the last stop before a traceback
        from codemode.js_runtime.prestart import WorkerStartError

        if isinstance(exc, WorkerStartError):  # the machine's, not ours: it says why
            echo(f"interpreter: error: {exc}", err=True)
            sys.exit(1)
        _crash(exc, argv)
    sys.exit(status if isinstance(status, int) else 0)


def _crash(exc: Exception, argv: list[str] | None) -> NoReturn:
    from codemode.terminal.crash import crash_exit

    crash_exit(exc, argv if argv is not None else sys.argv[1:])


def _not_installed(exc: ModuleNotFoundError) -> str | None:
    """The missing module's name when ``exc`` comes from a lean install (``pip install
    codemode``, without the full install's ``agent`` extra); None otherwise."""
    from importlib import metadata

    if not exc.name or exc.name.split(".")[0] == "codemode":
        return None
    try:
        requires = metadata.requires("codemode") or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        extra = re.search(r"extra\s*==\s*[\"'](\w+)[\"']", req)
        dist = re.split(r"[\s;<>=!~\[]", req, maxsplit=1)[0]
        if extra is None or extra.group(1) not in _FULL or dist == "codemode":
            continue
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            return exc.name
    return None


# The extras that make the full install.
_FULL = frozenset({"agent", "v8", "mcp"})


def _quiet_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
