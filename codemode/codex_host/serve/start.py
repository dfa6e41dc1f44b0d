"""Starting a code-mode host from its command-line options, and serving until its
client goes: what `interpreter code-mode-host` does once its arguments are read
(``cli/codex_host.py``), cold or in a process the warm server forked
(``codemode.warm``: its spare for a host calls ``host_options([])`` for the engine worker
it boots ahead)."""

from __future__ import annotations

import sys
from typing import NamedTuple, NoReturn

from codemode.codex_host.serve.listen import NETWORK_FLAG, Listen
from codemode.codex_host.session.limits import (
    DEFAULT_MAX_CELLS,
    DEFAULT_MAX_CONNECTION_CELLS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS,
    ClientBounds,
)

_ENGINES = ("quickjs", "v8")  # the click command's choices
_COUNTS = ("--max-sessions", "--max-cells", "--max-connections", "--max-cells-per-connection")


def _parse(args: list[str]) -> dict[str, str] | None:
    """``{option: value}`` for ``--name value`` / ``--name=value`` pairs (and
    ``NETWORK_FLAG``, which takes none), or None."""
    known = ("--listen", "--engine", "--timeout", "--memory-mb", *_COUNTS)
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        if args[i] == NETWORK_FLAG and NETWORK_FLAG not in found:
            found[NETWORK_FLAG] = ""
            i += 1
            continue
        name, eq, value = args[i].partition("=")
        if name not in known or name in found:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        found[name] = value
        i += 1
    return found


class HostOptions(NamedTuple):
    where: Listen
    engine: str
    timeout_s: float
    memory_mb: int
    max_cells: int = DEFAULT_MAX_CELLS
    bounds: ClientBounds = ClientBounds()


def host_options(args: list[str]) -> HostOptions | None:
    """`code-mode-host`'s options from ``args`` (after the command's name), or None
    where click must parse them (help, a bad value, an unknown option)."""
    options = _parse(args)
    if options is None:
        return None
    engine = options.get("--engine", "quickjs")
    try:
        timeout_s = float(options.get("--timeout", "3600"))
        memory_mb = int(options.get("--memory-mb", "256"))
        max_sessions = int(options.get("--max-sessions", str(DEFAULT_MAX_SESSIONS)))
        max_cells = int(options.get("--max-cells", str(DEFAULT_MAX_CELLS)))
        max_connections = int(options.get("--max-connections", str(DEFAULT_MAX_CONNECTIONS)))
        connection_cells = int(
            options.get("--max-cells-per-connection", str(DEFAULT_MAX_CONNECTION_CELLS))
        )
    except ValueError:
        return None
    if engine not in _ENGINES or not timeout_s >= 0.1 or memory_mb < 16:
        return None
    if min(max_sessions, max_cells, max_connections, connection_cells) < 1:
        return None
    from codemode.codex_host.serve.listen import parse_listen

    try:
        where = parse_listen(
            options.get("--listen", "stdio"), beyond_loopback=NETWORK_FLAG in options
        )
    except ValueError:
        return None
    return HostOptions(
        where,
        engine,
        timeout_s,
        memory_mb,
        max_cells,
        ClientBounds(max_sessions, max_connections, connection_cells),
    )


def serve_and_exit(options: HostOptions, *, command_process: bool) -> NoReturn:
    """Serve until the client goes, then exit (the click command's body too).

    ``command_process``: this process is the `interpreter` command, so it ends without
    Python's teardown of every module (``fast_exit``): Codex waits for its host to exit
    at the end of each turn, and that teardown was most of the 19 ms it waited."""
    from codemode.codex_host.serve.server import serve
    from codemode.codex_host.session.runtime import SessionLimits
    from codemode.process import interruptible

    limits = SessionLimits(
        engine=options.engine,
        timeout_s=options.timeout_s,
        memory_mb=options.memory_mb,
        max_cells=options.max_cells,
    )
    try:
        status = interruptible.run(serve(options.where, limits, options.bounds))
    except KeyboardInterrupt:
        status = 130
    except OSError as exc:
        from codemode.terminal.control_chars import echo  # lazy: only a failure prints

        echo(f"interpreter code-mode-host: {exc}", err=True)
        status = 1
    if command_process:
        from codemode.process.fast_exit import exit_now

        exit_now(status)
    sys.exit(status)

