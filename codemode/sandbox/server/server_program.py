"""The program a command server runs in its sandbox, as the host passes it there.

``command_server`` and the modules it imports are read once by the host process and
sent whole through a pipe, so a workspace that holds codemode's own source (a rewritten
``baseline.py`` in a checkout of codemode) cannot change what runs in a sandbox started
later: every server of the process runs the texts read for the first. In the sandbox
``python -I -S`` runs ``BOOT``, which makes a module of each text in turn, under its
own name, before it runs the last one, ``command_server``, as ``__main__``: the imports
between them find those modules and nothing is loaded from disk but the standard
library. Each module imports only the standard library and modules listed before it
(``tests/test_command_server_program.py`` holds the list to that).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

PACKAGE = "codemode.sandbox.server"
# Each after the modules it imports; the last is the entry point.
MODULES = ("proc_files", "baseline", "tidy", "command_server")

# What ``python -c`` runs: the program, as JSON ``[[module name, text], ...]``, from the
# descriptor named by argv[2].
BOOT = (
    "import json,os,sys,types\n"
    "f=os.fdopen(int(sys.argv[2]),'rb');p=json.loads(f.read());f.close()\n"
    "for n,s in p[:-1]:\n"
    " m=sys.modules[n]=types.ModuleType(n);exec(compile(s,n,'exec'),m.__dict__)\n"
    "exec(compile(p[-1][1],'command_server.py','exec'))"
)


@functools.cache
def program() -> bytes:
    """The program's texts, read once per process: what runs in the sandbox is what
    this process read for its first server."""
    folder = resources.files(PACKAGE)
    texts = [
        [f"{PACKAGE}.{name}", folder.joinpath(f"{name}.py").read_text(encoding="utf-8")]
        for name in MODULES
    ]
    # (It must fit the pipe it is written into before the server starts, 64 KiB: the
    # program's test holds it to that.)
    return json.dumps(texts).encode()
