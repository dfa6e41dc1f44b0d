"""`interpreter code-mode-host` started without click and the other commands.

Codex starts its code-mode host for every session and waits for it to answer, so the
host's start is part of every Codex turn; most of it was the command line itself
(click and every command module, imported to parse four options). When the arguments
are ones this module parses (the options `code-mode-host` has, each given once), the
host is served from here, as the click command would serve it; anything else (`--help`,
a bad value, an unknown option) is left to click, which says what is wrong.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from codemode.codex_host.listen import Listen

_ENGINES = ("quickjs", "v8")  # the click command's choices


def _parse(args: list[str]) -> dict[str, str] | None:
    """``{option: value}`` for ``--name value`` / ``--name=value`` pairs, or None."""
    known = ("--listen", "--engine", "--timeout", "--memory-mb")
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
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


def _launched_as_command() -> bool:
    """Whether this process is the `interpreter` command (its console script, or
    ``python -m codemode.cli``), not a program that imports the CLI."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "codemode.cli.__main__":
        return True
    path = getattr(main, "__file__", None) or ""
    return os.path.basename(path) in ("interpreter", "i")


def serve_if_asked(argv: list[str]) -> None:
    """``argv`` without the program name: serve and exit when it is `code-mode-host`
    with arguments parsed here; otherwise return (click parses them)."""
    if argv[:1] != ["code-mode-host"] or not _launched_as_command():
        return
    options = _parse(argv[1:])
    if options is None:
        return
    engine = options.get("--engine", "quickjs")
    try:
        timeout_s = float(options.get("--timeout", "3600"))
        memory_mb = int(options.get("--memory-mb", "256"))
    except ValueError:
        return
    if engine not in _ENGINES or not timeout_s >= 0.1 or memory_mb < 16:
        return
    from codemode.codex_host.listen import parse_listen

    try:
        where = parse_listen(options.get("--listen", "stdio"))
    except ValueError:
        return
    # Codex starts its host when the model's first exec arrives and waits for it: the
    # engine worker (a Python process importing its engine, confining itself) boots
    # now, on the other core, while this process imports asyncio, grpc and the runtime,
    # instead of after them. The pool adopts it (a session without its own heap limit
    # uses this one).
    import gc

    # What start-up creates lives as long as the host: no collection while it is made
    # (``server.py`` turns the collector back on once the host answers).
    gc.disable()
    from codemode.js_runtime import prestart

    prestart.spawn_early(engine, memory_mb * 1024 * 1024)
    # No spare worker behind each one the pool hands out: a session keeps the workers
    # its execs used and runs its next exec in one of them, so in a Codex turn a spare
    # only boots (a Python process, ~0.1 s of CPU) on the cores Codex is using. An exec
    # that runs beside another still gets a worker, started then.
    prestart.one_program = True
    from codemode.cli.crash import install_thread_hooks

    # (No quiet_grpc_fork() here, unlike the other commands: the host loads neither
    # grpcio nor protobuf; it speaks HTTP/2 and protobuf's wire format itself.)
    install_thread_hooks(argv)
    serve_and_exit(where, engine, timeout_s, memory_mb, command_process=True)


def serve_and_exit(
    where: Listen, engine: str, timeout_s: float, memory_mb: int, *, command_process: bool
) -> NoReturn:
    """Serve until the client goes, then exit (the click command's body too).

    ``command_process``: this process is the `interpreter` command, so it ends without
    Python's teardown of every module (``fast_exit``): Codex waits for its host to exit
    at the end of each turn, and that teardown was most of the 19 ms it waited."""
    asyncio = _asyncio_without_tls()

    from codemode.codex_host.runtime import SessionLimits
    from codemode.codex_host.server import serve

    limits = SessionLimits(engine=engine, timeout_s=timeout_s, memory_mb=memory_mb)
    try:
        status = asyncio.run(serve(where, limits))
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


def _asyncio_without_tls() -> ModuleType:
    """``asyncio``, imported without ``ssl`` when nothing has loaded it yet.

    ``asyncio`` imports ``ssl`` only to offer TLS, and ``ssl`` (OpenSSL's library and
    its enums) costs about 20 ms on a small machine when imported alone, 11 ms of the
    ~90 ms from spawn to serving that Codex waits for before its first exec. The host
    speaks plain HTTP/2 over stdio or a loopback socket and never asks asyncio for TLS,
    so ``asyncio`` is loaded as it is on a Python built without ``ssl`` (its own
    fallback: TLS then says the module is not available). The block is lifted at once:
    a later ``import ssl`` in this process works as usual.
    """
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        import asyncio

        return asyncio
    sys.modules["ssl"] = None  # type: ignore[assignment]  # import ssl -> ImportError
    try:
        import asyncio
    finally:
        del sys.modules["ssl"]
    return asyncio
