"""One repository's run, inside a worker process (or a Ray task).

The script runs in an isolated copy of the repository (``workcopy.py``), never in the
repository itself; what it changed there comes back in the result as a journal
(``changes.py``) for the driver to apply, all or nothing, when the run succeeded. A
dry run needs no copy: the file tools write into an overlay and the shell is refused.

Each repository's script gets a fresh isolate (in the engine worker its process keeps
from one repository to the next: ``programs.py``), a ``ToolContext`` whose only
writable root is its copy, and its own sandbox session rooted there, so neither the
file tools nor the commands a script starts can write into a sibling.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from codemode.batch.models import ERROR_CHARS, VALUE_CHARS, RepoResult, RepoTask, now_iso


def run_repository(task: RepoTask, cancel_on_sigterm: bool = False) -> RepoResult:
    """Run ``task``'s script in its repository; a failure becomes a result.

    With ``cancel_on_sigterm`` (a pool worker's main thread), SIGTERM cancels the run
    the way Ctrl-C cancels `interpreter run` (the tools clean up: a running command's
    process group is killed), then the process exits.
    """
    started = time.perf_counter()
    started_at = now_iso()
    try:
        result = asyncio.run(_run(task, started, cancel_on_sigterm))
    except asyncio.CancelledError:
        if cancel_on_sigterm:
            # Stopped by the parent, and cleaned up: exit rather than take the next task
            # the pool had already queued here.
            from codemode.batch.scratch import finish_removing

            finish_removing()  # os._exit runs no finalizer
            os._exit(128 + signal.SIGTERM)
        raise
    except Exception as exc:  # a bug here must fail one repository, not the batch
        result = RepoResult(
            repository=task.repository,
            status="failed",
            duration_s=round(time.perf_counter() - started, 4),
            tool_calls=0,
            error=f"{type(exc).__name__}: {exc}",
            error_kind="internal",
        )
    result.started_at, result.ended_at = started_at, now_iso()
    return result


async def _run(task: RepoTask, started: float, cancel_on_sigterm: bool) -> RepoResult:
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
    if task.dry_run and task.archive is None and task.agent is None:
        return await _execute(task, root, root, started)
    from codemode.batch.scratch import scratch_dir

    with scratch_dir() as scratch:
        name = root.name or "repository"
        base = root
        if task.archive is not None:
            from codemode.batch.shipping import unpack

            base = Path(scratch) / "base" / name
            unpack(task.archive, base)
            if task.dry_run and task.agent is None:
                result = await _execute(task, root, base, started)
            else:
                work = Path(scratch) / "work" / name
                result = await _run_in_copy(task, root, base, work, started)
            result.worker = _ray_node()
            return result
        return await _run_in_copy(task, root, base, Path(scratch) / "work" / name, started)


def _ray_node() -> str | None:
    """The Ray node this runs on, when it runs as a Ray task."""
    import sys

    if "ray" not in sys.modules:
        return None
    try:
        context = sys.modules["ray"].get_runtime_context()
        return f"ray node {context.get_node_id()[:12]}"
    except Exception:
        return None


async def _run_in_copy(
    task: RepoTask, root: Path, base: Path, work: Path, started: float
) -> RepoResult:
    """Run in ``work``, a copy of ``base`` (the repository, or what was shipped of it),
    and record what changed against ``base``."""
    from codemode.batch import changes, diff_text
    from codemode.batch.workcopy import make_copy

    make_copy(base, work)
    outcome = await _execute(task, root, work, started)
    try:
        journal = changes.compute(base, work)
    except changes.TooLarge as exc:  # a limit, as a script's time or memory is
        outcome.status, outcome.error_kind, outcome.error = "failed", "limit", str(exc)
        outcome.rolled_back = True
        return outcome
    outcome.set_changes(changes.changed_files(journal), diff_text.render(base, journal))
    outcome.rolled_back = not outcome.ok and bool(journal)
    if outcome.ok:
        outcome.journal = journal or None
    return outcome


async def _execute(task: RepoTask, root: Path, work: Path, started: float) -> RepoResult:
    """Run the script with ``work`` as its workspace (``root``, the repository, names it)."""
    if task.agent is not None:
        from codemode.batch.agent_worker import run_agent

        return await run_agent(task.agent, task.repository, work, started)
    from codemode.assembly.program import program_parts
    from codemode.batch.programs import run_script
    from codemode.hooks.loading import program_hooks
    from codemode.js_runtime.output import cap_value

    repo_global = {"path": str(work), "name": root.name, "origin": str(root)}
    # The user's hooks (and the repository's trusted ones) guard a batch's calls too.
    hooks = program_hooks(root, sandbox=task.sandbox).engine
    parts = program_parts(work, sandbox=task.sandbox, dry_run=task.dry_run, hooks=hooks)
    try:
        result = await run_script(
            parts,
            task.source,
            engine=task.engine,
            limits=task.limits,
            globals={"argv": list(task.argv), "repo": repo_global},
        )
    finally:
        parts.context.sandbox.close()
    error = result.error
    outcome = RepoResult(
        repository=task.repository,
        status="ok" if error is None else "failed",
        duration_s=round(time.perf_counter() - started, 4),
        tool_calls=len(result.tool_calls),
        error=None if error is None else error.one_line()[:ERROR_CHARS],
        error_kind=None if error is None else error.kind,
        value=cap_value(result.value, VALUE_CHARS)[0],
        output=result.output,
    )
    if parts.dry_run is not None:
        from codemode.batch.diff_text import DIFF_CHARS, cap_text

        workspace = parts.context.workspace
        diff = cap_text(parts.dry_run.diff(workspace), DIFF_CHARS, "diff")
        outcome.set_changes(parts.dry_run.changed_paths(workspace), diff)
    return outcome
