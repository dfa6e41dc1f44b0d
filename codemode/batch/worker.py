"""One repository's run, inside a worker process (or a Ray task).

Each repository gets a fresh ``ToolHost`` — its own isolate, a ``ToolContext`` whose
only writable root is that repository, and its own sandbox session rooted there — so
neither the file tools nor the commands a script starts can write into a sibling.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from codemode.batch.models import RepoResult, RepoTask


def run_repository(task: RepoTask, cancel_on_sigterm: bool = False) -> RepoResult:
    """Run ``task``'s script in its repository; a failure becomes a result.

    With ``cancel_on_sigterm`` (a pool worker's main thread), SIGTERM cancels the run
    the way Ctrl-C cancels `interpreter run` (the tools clean up: a running command's
    process group is killed), then the process exits.
    """
    started = time.perf_counter()
    try:
        return asyncio.run(_run(task, started, cancel_on_sigterm))
    except asyncio.CancelledError:
        if cancel_on_sigterm:
            # Stopped by the parent, and cleaned up: exit rather than take the next task
            # the pool had already queued here.
            os._exit(128 + signal.SIGTERM)
        raise
    except Exception as exc:  # a bug here must fail one repository, not the batch
        return RepoResult(
            repository=task.repository,
            status="failed",
            duration_s=time.perf_counter() - started,
            tool_calls=0,
            error=f"{type(exc).__name__}: {exc}",
            error_kind="internal",
        )


async def _run(task: RepoTask, started: float, cancel_on_sigterm: bool) -> RepoResult:
    from codemode.host import ToolHost

    if cancel_on_sigterm:
        current = asyncio.current_task()
        assert current is not None
        loop = asyncio.get_running_loop()

        def stop() -> None:
            # Once is enough. The pool sends SIGTERM again when it sees another worker
            # exit; a second one would cut the cleanup short (a command left unreaped)
            # or land while the loop closes its wake-up pipe (EBADF on stderr).
            loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            current.cancel()

        loop.add_signal_handler(signal.SIGTERM, stop)

    root = Path(task.repository)
    repo_global = {"path": str(root), "name": root.name}
    from codemode.hooks.loading import program_hooks

    # The user's hooks (and the repository's trusted ones) guard a batch's calls too.
    hooks = program_hooks(root, sandbox=task.sandbox).engine
    host = ToolHost(
        root,
        engine=task.engine,
        limits=task.limits,
        globals={"argv": list(task.argv), "repo": repo_global},
        sandbox=task.sandbox,
        dry_run=task.dry_run,
        hooks=hooks,
    )
    try:
        result = await host.execute(task.source)
    finally:
        host.close()
    error = result.error
    outcome = RepoResult(
        repository=task.repository,
        status="ok" if error is None else "failed",
        duration_s=round(time.perf_counter() - started, 4),
        tool_calls=len(result.tool_calls),
        error=None if error is None else error.one_line(),
        error_kind=None if error is None else error.kind,
        value=result.value,
        output=result.output,
    )
    if host.dry_run is not None:
        outcome.changed_files = host.dry_run.changed_paths(host.workspace)
        outcome.diff = host.dry_run.diff(host.workspace)
    return outcome
