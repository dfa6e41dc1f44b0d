"""Starting `interpreter run`'s engine worker before the command line is even parsed.

The worker's boot (a Python process importing its engine) then overlaps the CLI's own
imports, which is most of what `interpreter run hello.js` costs. The arguments are
only peeked at here; click still parses them. A guess that turns out wrong (a bad
option value) costs one spare worker, killed at exit.
"""

from __future__ import annotations

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
    # lazy: the engine pool, only when a prestart applies
    from codemode.js_runtime.worker_process import POOL

    POOL.prestart(engine, int(memory) * 1024 * 1024)
