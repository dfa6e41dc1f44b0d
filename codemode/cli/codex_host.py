"""``interpreter code-mode-host``: Codex's code-mode host protocol served on our runtime."""

from __future__ import annotations

import click

from codemode.cli.root import cli


@cli.command("code-mode-host")
@click.option(
    "--listen",
    default="stdio",
    show_default=True,
    metavar="stdio|grpc+stdio://|grpc://127.0.0.1:PORT",
    help="stdio: the framed JSON protocol (Codex 0.148); grpc+stdio://: gRPC over "
    "stdin/stdout (Codex 0.169); grpc://HOST:PORT: gRPC on TCP (app-server --code-mode-host).",
)
@click.option(
    "--engine",
    type=click.Choice(["quickjs", "v8"]),
    default="quickjs",
    show_default=True,
    help="The JavaScript engine programs run in.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    default=3600.0,
    show_default=True,
    help="Seconds a program may run in all, across yields and waits.",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(min=16),
    default=256,
    show_default=True,
    help="Heap cap per program (a session's max_heap_size_bytes overrides it).",
)
def code_mode_host(listen: str, engine: str, timeout_s: float, memory_mb: int) -> None:
    """Serve Codex's code-mode host protocol: Codex (or any client) runs programs here.

    Nested tool calls go back to the client, which runs them; programs run in this
    host's confined engine workers. Put it beside Codex's binary in place of
    `codex-code-mode-host` (docs/codex-host.md).
    """
    from codemode.cli.fast_host import serve_and_exit
    from codemode.codex_host.listen import parse_listen
    from codemode.process.fast_exit import is_command_process

    try:
        where = parse_listen(listen)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    serve_and_exit(where, engine, timeout_s, memory_mb, command_process=is_command_process())
