"""The code session a batch worker process runs its repositories' scripts in.

Booting an engine worker (a Python process that imports its engine and confines
itself) costs ~50 ms of CPU, more than everything else a small repository costs. So a
batch worker process (a pool worker, a Ray worker) keeps one code session, not
persistent, for all the repositories it runs, one after another: each script still
gets a fresh isolate (a new QuickJS runtime or V8 isolate), only the engine process
it lives in is reused. That process keeps no state but its isolate, and it is
confined (no file opened once booted, no process started), so nothing of one
repository's script survives into the next one's.

What is a repository's own stays per repository: its tools and their context (the
workspace is its copy, its sandbox session and scratch folder, its hooks) are the
delegate of that script's execution only (a ``ToolHost`` over the repository's parts,
running in the kept session: the runtime's delegate is per execution), and ``repo`` /
``argv`` are set up in that script's fresh isolate (the host's globals, for a shared
session), never kept in the session. Timers and tool calls
live in this process and end with the script (the runtime cancels what is left).
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode.js_runtime.models import ExecResult, Limits

if TYPE_CHECKING:
    from codemode.assembly.program import ProgramParts
    from codemode.js_runtime.session import CodeSession


@dataclass
class _Kept:
    engine: str
    session: CodeSession
    busy: bool = False


_kept: _Kept | None = None


def _session(engine: str, limits: Limits) -> _Kept:
    """This process's session for ``engine`` (a new one if it has none, or if it is in
    use: scripts never share one at the same time)."""
    global _kept
    kept = _kept
    if kept is not None and kept.engine == engine and not kept.busy:
        return kept
    from codemode.host import shared_session

    fresh = _Kept(engine, shared_session(engine=engine, limits=limits))
    if kept is None or not kept.busy:
        if kept is not None:
            kept.session.close_now()
        _kept = fresh
        if kept is None:
            atexit.register(_close)
    return fresh


def _close() -> None:
    global _kept
    kept, _kept = _kept, None
    if kept is not None:
        kept.session.close_now()


async def run_script(
    parts: ProgramParts,
    source: str,
    *,
    engine: str,
    limits: Limits,
    globals: dict[str, Any],
) -> ExecResult:
    """Run one repository's script to its end with ``parts``'s tools and ``globals``,
    in a fresh isolate in this process's kept engine worker (see the module's
    docstring); cancelled, the script stops too."""
    from codemode.host import ToolHost

    kept = _session(engine, limits)
    kept.busy = True
    # The repository's host, in the kept session: its delegate, tools and globals are
    # this script's execution's only.
    host = ToolHost.from_parts(parts, engine=engine, limits=limits, globals=globals,
                               session=kept.session)  # fmt: skip
    try:
        result = await host.execute(source)
    except BaseException:
        # Cancelled (the batch is stopping): nothing of this session is kept.
        if kept is _kept:
            _close()
        kept.session.close_now()
        raise
    finally:
        kept.busy = False
    if kept is not _kept:  # a second session, made while the kept one was busy
        await kept.session.close()
    return result
