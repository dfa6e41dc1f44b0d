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

from codemode.codex_host.serve.start import host_options, serve_and_exit


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
    options = host_options(argv[1:])
    if options is None:
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

    prestart.spawn_early(options.engine, options.memory_mb * 1024 * 1024)
    # No spare worker behind each one the pool hands out: a session keeps the workers
    # its execs used and runs its next exec in one of them, so in a Codex turn a spare
    # only boots (a Python process, ~0.1 s of CPU) on the cores Codex is using. An exec
    # that runs beside another still gets a worker, started then.
    prestart.one_program = True
    from codemode.cli.crash import install_thread_hooks

    # (No quiet_grpc_fork() here, unlike the other commands: the host loads neither
    # grpcio nor protobuf; it speaks HTTP/2 and protobuf's wire format itself.)
    install_thread_hooks(argv)
    serve_and_exit(options, command_process=True)

