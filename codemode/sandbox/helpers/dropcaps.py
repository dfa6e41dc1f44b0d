"""The small static program that empties the capability sets of a command run as root.

bubblewrap run by root keeps the bounding set full (it only clears the other sets), so
the command, started holding nothing but CAP_SETPCAP, must empty it itself before it
runs. ``setpriv`` does that too, but its exec and dynamic loading cost about a
millisecond of every confined call; ``dropcaps.c`` does only that, statically linked.

It is compiled once per machine and user (``compiled``), the first time bubblewrap is
probed. Where no compiler works, ``path()`` is None and ``bwrap.isolation`` uses
setpriv, as before. The ``compiled`` module says why no command can swap it.
"""

from __future__ import annotations

from codemode.sandbox.helpers import compiled


def path() -> str | None:
    """The compiled helper (built now if needed), or None where it cannot be had."""
    return compiled.path("dropcaps.c")
