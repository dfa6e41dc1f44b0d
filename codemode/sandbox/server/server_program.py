"""The program a command server runs in its sandbox, as the host passes it there.

``command_server`` and the modules it imports are read once by the host process and
sent whole through a pipe, so a workspace that holds codemode's own source (a rewritten
``baseline.py`` in a checkout of codemode) cannot change what runs in a sandbox started
later: every server of the process runs the texts read for the first. They travel
compiled (``marshal``: the sandbox runs the same interpreter, ``sys.executable``), so the
server neither compiles them nor imports ``json`` to read them. In the sandbox
``python -I -S`` runs ``BOOT``, which makes a module of each in turn, under its own
name, before it runs the last one, ``command_server``, as ``__main__``: the imports
between them find those modules and nothing is loaded from disk but the standard
library. Each module imports only the standard library and modules listed before it
(``tests/test_command_server_program.py`` holds the list to that).
"""

from __future__ import annotations

import functools
import marshal
from importlib import resources

PACKAGE = "codemode.sandbox.server"
# Each after the modules it imports; the last is the entry point.
MODULES = ("proc_files", "baseline", "tidy", "command_server")

# What ``python -c`` runs: the program, marshalled ``[(module name, code), ...]``, from
# the descriptor named by argv[2] (``type(sys)``: the module type, without ``types``).
BOOT = (
    "import marshal,os,sys\n"
    "f=int(sys.argv[2]);b=[]\n"
    "while c:=os.read(f,65536):b.append(c)\n"
    "os.close(f);p=marshal.loads(b''.join(b))\n"
    "for n,c in p[:-1]:\n"
    " m=sys.modules[n]=type(sys)(n);exec(c,m.__dict__)\n"
    "exec(p[-1][1])"
)


@functools.cache
def program() -> bytes:
    """The program, read and compiled once per process: what runs in the sandbox is
    what this process read for its first server."""
    return marshal.dumps(
        [(f"{PACKAGE}.{name}", compile(text, f"{name}.py", "exec")) for name, text in texts()]
    )  # (it must fit the pipe it is written into, 64 KiB: the program's test holds it)


@functools.cache
def texts() -> list[tuple[str, str]]:
    """Each module's name and text, as ``program`` compiled them."""
    folder = resources.files(PACKAGE)
    return [(name, folder.joinpath(f"{name}.py").read_text(encoding="utf-8")) for name in MODULES]
