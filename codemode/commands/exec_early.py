"""Starting `interpreter exec --code-mode`'s engine worker before the command line's own
imports, as `interpreter run` does (``js_runtime.early``).

An exec turn cannot run its first program before the worker has booted (a Python
process importing its engine and confining itself), and the worker used to be started
only once the session was built, after every import: its boot was then on the way to
the first program. Started here, before click, pydantic and the agent are imported, it
boots on another core meanwhile, and the session's pool adopts it
(``js_runtime.prestart.adopt``). The arguments are only peeked at; a guess that turns
out wrong (a configuration choosing other limits) costs one worker, which exits with
the process.
"""

from __future__ import annotations

from itertools import pairwise

_NOT_A_TURN = ("-h", "--help", "--classic", "--replay", "--repos")


def prestart_for(argv: list[str]) -> bool:
    """``argv`` without the program name: start the worker when it is a single
    `exec --code-mode` turn (with its engine when ``-c engine=...`` names one)."""
    if argv[:1] != ["exec"] or "--code-mode" not in argv:
        return False
    if any(a in _NOT_A_TURN or a.split("=", 1)[0] in _NOT_A_TURN for a in argv):
        return False
    engine = "quickjs"
    for flag, value in pairwise(argv):
        if flag in ("-c", "--config") and value.replace(" ", "").startswith("engine="):
            engine = value.split("=", 1)[1].strip().strip("\"'")
    if engine not in ("quickjs", "v8"):
        return False
    from codemode.js_runtime import prestart  # lazy: only when a prestart applies
    from codemode.js_runtime.models import AGENT_MEMORY_MB

    # No spare behind it: the session runs its programs one after another on this one
    # worker (a persistent isolate), so a spare only boots for a worker that was killed
    # (a program over its limits), and meanwhile competes with the turn for the CPU.
    prestart.one_program = True
    try:
        prestart.spawn_early(engine, AGENT_MEMORY_MB * 1024 * 1024)
    except OSError:
        return False  # (no process or pipe to spare now): the session starts its own
    return True
