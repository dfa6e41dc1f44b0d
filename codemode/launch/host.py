"""`interpreter code-mode-host` served without click, cold or in a process the warm
server forked.

Codex starts its host at each session's first exec and waits for it. Options that
parse here (``host_options``: the click command's own, with the same values) are served
at once; importing click and the command tree, and parsing with them, was ~15 ms of a
cold host's start (docs/codex-host.md). `--help`, a bad value or an unknown option
return, for click to answer as it answers every command."""

from __future__ import annotations


def serve_host(args: list[str]) -> None:
    """Serve ``args`` (``["code-mode-host", ...]``) and exit; returns only where click
    must read the options."""
    from codemode.codex_host.serve.start import host_options

    options = host_options(args[1:])
    if options is None:
        return
    from codemode.codex_host.serve.start import serve_and_exit
    from codemode.js_runtime import prestart
    from codemode.process import entry
    from codemode.sandbox.confinement.grpc_fork import quiet_grpc_fork
    from codemode.terminal.crash import crash_exit, install_thread_hooks

    # As the command line does for every command (``codemode.cli.main``).
    entry.claim()
    quiet_grpc_fork()
    install_thread_hooks(args)
    defaults = host_options([])
    if defaults is None or (options.engine, options.memory_mb) != (
        defaults.engine, defaults.memory_mb
    ):  # fmt: skip
        prestart.discard_early()  # a warm spare's, booted for another engine or cap
    # A session keeps the workers its execs used: no spare worker boots behind each one
    # (it would take a CPU from the client while its first exec runs).
    prestart.one_program = True
    try:
        serve_and_exit(options, command_process=True)  # (an OSError: one line, status 1)
    except Exception as exc:  # the last stop before a traceback
        crash_exit(exc, args)
