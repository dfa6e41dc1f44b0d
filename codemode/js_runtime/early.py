"""Starting `interpreter run`'s engine worker before the command line is even parsed.

The worker's boot (a Python process importing its engine) then overlaps the CLI's own
imports, which is most of what `interpreter run hello.js` costs: it is started with
``prestart.spawn_early`` before even asyncio is imported, and the pool adopts it. The
arguments are only peeked at here; click still parses them. A guess that turns out
wrong (a bad option value) costs one worker, which exits when we do (its pipes close).

The same `run` then exits through ``codemode.process.fast_exit``, without the interpreter's
teardown (as a finished `exec` does).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

_DEFAULT_MEMORY_MB = 512  # `interpreter run --memory`'s default


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def prestart_for(argv: list[str]) -> None:
    """``argv`` without the program name: prestart when it is a single `run`."""
    if not argv or argv[0] != "run":
        return
    rest = argv[1:]
    if any(a in ("-h", "--help", "--repos") or a.startswith("--repos=") for a in rest):
        return
    engine = _option(rest, "--engine") or "quickjs"
    memory = _option(rest, "--memory") or str(_DEFAULT_MEMORY_MB)
    if engine not in ("quickjs", "v8") or not memory.isdigit() or int(memory) < 1:
        return
    global _started
    # Only os, sys and json so far: the worker boots while asyncio and the rest import.
    from codemode.js_runtime import prestart  # lazy: only when a prestart applies

    prestart.one_program = True  # no spare behind it
    prestart.spawn_early(engine, int(memory) * 1024 * 1024)
    _started = True


_started = False


def run_and_exit(main: Callable[[list[str] | None], object], argv: list[str] | None) -> None:
    """Run the CLI's ``main``; after a `run` that ``prestart_for`` started early, exit
    without tearing the interpreter down.

    Python's own exit frees every module and object one by one, which is a large share
    of a short `interpreter run` (and of how long Ctrl-C takes to return the prompt);
    ``codemode.process.fast_exit`` does what an exit must do and skips only that teardown.
    """
    if not (_started and argv is None and sys.argv[1:2] == ["run"]):
        main(argv)
        return
    from codemode.process.fast_exit import exit_now  # lazy: only for an early-started run

    try:
        main(argv)
        status: object = 0
    except SystemExit as exc:
        status = exc.code
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): printed, status 1
        print(status, file=sys.stderr)
        code = 1
    exit_now(code)
