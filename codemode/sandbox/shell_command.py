"""The argv that runs a shell command line: the one place a command becomes an argv."""

from __future__ import annotations

from codemode.locations.host_programs import host_program


def shell_argv(command: str, *, login: bool = False) -> list[str]:
    """bash (``-lc`` for a login shell) when installed, else POSIX sh, running ``command``."""
    # never a bash from a PATH entry inside a writable root (``host_programs``)
    bash = host_program("bash")
    return [bash or "/bin/sh", "-lc" if login else "-c", command]
