"""Where an unexpected exception's traceback goes: a log file under
``$CODEMODE_HOME/logs``, so the terminal shows one line and the details are kept.

What writing the log needs (``tempfile``, ``pathlib``, ``traceback``) is imported when
there is one to write: the hooks are installed at every start (the code-mode host's
among them, which Codex waits for), and most processes never crash."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from pathlib import Path

# An unexpected exception's exit status (sysexits' EX_SOFTWARE): not one a command
# gives for its own failures.
INTERNAL_ERROR_STATUS = 70


def record_crash(exc: BaseException, argv: list[str]) -> str:
    """Write ``exc``'s traceback to a new log file and return its path; when neither
    the logs folder nor the temporary folder takes it, say so instead of a path."""
    import tempfile
    import traceback
    from pathlib import Path

    from codemode.locations.config_file import codemode_home

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = f"internal-error-{stamp}-{os.getpid()}.log"
    text = f"interpreter {' '.join(argv)}\npython {sys.version.split()[0]}\n\n" + "".join(
        traceback.format_exception(exc)
    )
    folders: list[Path] = []
    try:
        folders.append(codemode_home() / "logs")
    except Exception:  # a broken home must not hide the first error
        pass
    folders.append(Path(tempfile.gettempdir()))
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
                out.write(text)
            return str(path)
        except OSError:
            continue
    return "no log file could be written"


def one_line(text: str) -> str:
    """The first line of ``text``, control characters escaped (a message may quote a
    hostile file name or server reply: no escape sequence reaches the terminal)."""
    first, _, rest = text.strip().partition("\n")
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in first)
    return shown + (" ..." if rest.strip() else "")


def crash_exit(exc: BaseException, argv: list[str]) -> NoReturn:
    """``exc``'s traceback to a log file, one line on stderr naming it, and exit with
    ``INTERNAL_ERROR_STATUS``: the last stop before a traceback on the terminal."""
    where = record_crash(exc, argv)
    reason = one_line(f"{type(exc).__name__}: {exc}")
    _say(f"interpreter: internal error: {reason} (see {where})")
    sys.exit(INTERNAL_ERROR_STATUS)


def install_thread_hooks(argv: list[str]) -> None:
    """An exception that ends a thread, or one Python cannot raise (in ``__del__``, say),
    is logged like a crash and shown as one line, not as Python's traceback."""
    import threading

    def on_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or isinstance(args.exc_value, SystemExit):
            return
        where = record_crash(args.exc_value, argv)
        reason = one_line(f"{type(args.exc_value).__name__}: {args.exc_value}")
        _say(f"interpreter: internal error in a thread: {reason} (see {where})")

    def on_unraisable(args: sys.UnraisableHookArgs) -> None:
        if args.exc_value is None:
            return
        where = record_crash(args.exc_value, argv)
        reason = one_line(f"{type(args.exc_value).__name__}: {args.exc_value}")
        _say(f"interpreter: internal error (ignored): {reason} (see {where})")

    threading.excepthook = on_thread
    sys.unraisablehook = on_unraisable


def _say(line: str) -> None:
    try:
        from codemode.terminal.control_chars import echo

        echo(line, err=True)
    except (OSError, ValueError):
        pass  # stderr is gone: the log file has it
