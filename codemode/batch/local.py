"""The local backend: a process pool, one repository per task.

Workers are spawned (not forked): the parent runs a progress thread, and forking a
threaded process is unsafe. A worker that dies (killed for memory, a crash in native
code) breaks the whole pool; the repositories that were unfinished then get one more
try in a fresh pool, and those still unfinished after a second break are reported
failed, so one bad repository cannot sink the rest of the batch.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from codemode.batch.models import RepoResult, RepoTask, worker_failure
from codemode.batch.worker import run_repository

OnResult = Callable[[RepoResult], None]


def _init_worker() -> None:
    """Workers leave Ctrl-C to the parent, which stops them with SIGTERM (a running
    script is then cancelled: see ``run_repository``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(tasks: list[RepoTask], jobs: int, on_result: OnResult) -> None:
    """Run every task on up to ``jobs`` worker processes, calling ``on_result`` (in this
    process) as each finishes."""
    attempts: dict[str, int] = {}
    todo = list(tasks)
    while todo:
        todo = _run_pool(todo, jobs, on_result, attempts)


def _run_pool(
    tasks: list[RepoTask], jobs: int, on_result: OnResult, attempts: dict[str, int]
) -> list[RepoTask]:
    """One pool's worth of work; returns the tasks to retry after the pool broke."""
    retry: list[RepoTask] = []
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(jobs, len(tasks))), mp_context=context, initializer=_init_worker
    )
    try:
        futures: dict[Future[RepoResult], RepoTask] = {
            pool.submit(run_repository, task, cancel_on_sigterm=True): task for task in tasks
        }
        for future in as_completed(futures):
            task = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                attempts[task.repository] = attempts.get(task.repository, 0) + 1
                if attempts[task.repository] < 2:
                    retry.append(task)
                    continue
                result = worker_failure(
                    task.repository, "the worker process died twice while this repository ran"
                )
            except Exception as exc:  # e.g. a result that could not be pickled back
                result = worker_failure(task.repository, f"{type(exc).__name__}: {exc}")
            on_result(result)
    except BaseException:
        # Interrupted: drop what has not started and stop what is running. The pool has
        # no public way to stop its workers before Python 3.14, hence _processes.
        running = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in running:
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True)
    return retry
