"""Ending a process without the interpreter's teardown: `interpreter code-mode-host`'s
(``codex_host/serve/start.py``: Codex waits for its host to exit at the end of every turn),
and any command's that Ctrl-C stopped (``cli.main``: Ctrl-C ends a command within 200 ms).

Python's own exit frees every module and object one by one: with the ~500 modules a
command imports that is tens of ms after its work is done. ``exit_now`` does what an
exit must do, in the same order as ``sys.exit`` would, and skips only that teardown:
non-daemon threads are joined (after the hooks that tell executor threads to stop),
``atexit`` handlers run (engine workers are killed there, ``weakref.finalize``
callbacks such as temporary folders run there), and the standard streams are flushed.
Other commands exit as Python does (issue 41: their cold start carries no such saving;
a warm start skips the teardown anyway).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

# The status Python exits with when it cannot flush stdout at exit.
_FLUSH_FAILED = 120


def is_command_process() -> bool:
    """Whether this process is the ``interpreter`` console script itself (its
    ``__main__`` runs ``codemode.launch.main`` or ``codemode.cli.main``), not a test or
    a program embedding the CLI, for which exiting early would end more than the command."""
    main = getattr(sys.modules.get("__main__"), "main", None)
    if main is None:
        return False
    # The console scripts' entry (``codemode.launch``, which runs ``codemode.cli`` when
    # it starts cold), or ``codemode.cli`` itself (``python -m codemode.cli``).
    entries = (sys.modules.get("codemode.launch"), sys.modules.get("codemode.cli"))
    return any(main is getattr(entry, "main", object()) for entry in entries if entry)


def exit_now(status: int) -> NoReturn:
    """Exit with ``status`` as ``sys.exit`` would, without the interpreter's teardown."""
    # What the interpreter's own shutdown runs first: threading's exit hooks (they stop
    # executor threads), then a join of every non-daemon thread.
    shutdown: Callable[[], None] | None = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    code = status
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout and code == 0:
                code = _FLUSH_FAILED
    os._exit(code)
