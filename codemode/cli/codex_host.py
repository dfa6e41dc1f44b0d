"""``interpreter code-mode-host``: Codex's code-mode host protocol served on our runtime."""

from __future__ import annotations

import click

from codemode.cli.root import cli
from codemode.codex_host.serve.listen import NETWORK_FLAG
from codemode.codex_host.session.limits import (
    DEFAULT_MAX_CELLS,
    DEFAULT_MAX_CONNECTION_CELLS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS,
)


@cli.command("code-mode-host")
@click.option(
    "--listen",
    default="stdio",
    show_default=True,
    metavar="stdio|grpc+stdio://|grpc://127.0.0.1:PORT",
    help="stdio: the framed JSON protocol (Codex 0.148); grpc+stdio://: gRPC over "
    "stdin/stdout (Codex 0.169); grpc://HOST:PORT: gRPC on TCP (app-server --code-mode-host), "
    "loopback only, served to this user alone.",
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
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SESSIONS,
    show_default=True,
    help="Sessions one client (connection) may have open at once.",
)
@click.option(
    "--max-cells",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CELLS,
    show_default=True,
    help="Cells one session may hold at once (running, or ended and not yet reported).",
)
@click.option(
    "--max-cells-per-connection",
    "max_connection_cells",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CONNECTION_CELLS,
    show_default=True,
    help="Cells one client (connection) may hold at once, across its sessions.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CONNECTIONS,
    show_default=True,
    help="TCP clients served at once.",
)
@click.option(
    NETWORK_FLAG,
    "beyond_loopback",
    is_flag=True,
    help="Let grpc://HOST:PORT listen beyond loopback. UNSAFE: the protocol has no "
    "authentication, so anyone who can reach the port runs programs here.",
)
def code_mode_host(
    listen: str,
    engine: str,
    timeout_s: float,
    memory_mb: int,
    max_sessions: int,
    max_cells: int,
    max_connection_cells: int,
    max_connections: int,
    beyond_loopback: bool,
) -> None:
    """Serve Codex's code-mode host protocol: Codex (or any client) runs programs here.

    Nested tool calls go back to the client, which runs them; programs run in this
    host's confined engine workers. Put it beside Codex's binary in place of
    `codex-code-mode-host` (docs/codex-host.md); served warm like any command
    (docs/warm.md).
    """
    from codemode.codex_host.serve.listen import parse_listen
    from codemode.codex_host.serve.start import HostOptions, serve_and_exit
    from codemode.codex_host.session.limits import ClientBounds
    from codemode.process.fast_exit import is_command_process

    try:
        where = parse_listen(listen, beyond_loopback=beyond_loopback)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    bounds = ClientBounds(max_sessions, max_connections, max_connection_cells)
    options = HostOptions(where, engine, timeout_s, memory_mb, max_cells, bounds)
    serve_and_exit(options, command_process=is_command_process())
