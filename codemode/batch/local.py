"""The local backend: a process pool, one repository per task.

Workers are spawned (not forked): the parent runs a progress thread, and forking a
threaded process is unsafe. The pool is handed at most ``jobs`` repositories at a time,
so that when a worker dies (killed for memory, a crash in native code) — which breaks
the whole pool — the repositories in flight are exactly the suspects. Each suspect is
then run again on its own in a fresh one-worker pool, where a second death can only be
its own and is reported as its failure; the rest of the batch goes on in a new pool.
A rerun starts from the repository's original state (scripts run in a copy, see
``workcopy.py``) and is counted in the result's ``attempts``.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from codemode.batch.models import RepoResult, RepoTask, now_iso, worker_failure
from codemode.batch.worker import run_repository

OnResult = Callable[[RepoResult], None]
Stop = Callable[[], bool]


def _init_worker() -> None:
    """Workers leave Ctrl-C to the parent, which stops them with SIGTERM (a running
    script is then cancelled: see ``run_repository``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(
    tasks: list[RepoTask], jobs: int, on_result: OnResult, stop: Stop = lambda: False
) -> None:
    """Run every task on up to ``jobs`` worker processes, calling ``on_result`` (in this
    process) as each finishes. Once ``stop()`` says so, no further task is started."""
    todo = deque(tasks)
    while todo and not stop():
        for suspect in _run_pool(todo, jobs, on_result, stop):
            _run_alone(suspect, on_result)


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker)
    try:
        yield pool
    except BaseException:
        # Interrupted: stop the running workers now. The pool has no public way to do
        # that before Python 3.14, hence _processes.
        running = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in running:
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True)


def _submit(pool: ProcessPoolExecutor, task: RepoTask) -> Future[RepoResult]:
    return pool.submit(run_repository, task, cancel_on_sigterm=True)


def _run_pool(
    todo: deque[RepoTask], jobs: int, on_result: OnResult, stop: Stop
) -> list[RepoTask]:
    """Work through ``todo`` until it is empty or the pool breaks; returns the tasks that
    were in flight when it broke."""
    with _pool(max(1, min(jobs, len(todo)))) as pool:
        in_flight: dict[Future[RepoResult], RepoTask] = {}
        while (todo and not stop()) or in_flight:
            while todo and len(in_flight) < jobs and not stop():
                task = todo.popleft()
                try:
                    in_flight[_submit(pool, task)] = task
                except BrokenProcessPool:
                    # A worker died since the last wait: this task never started.
                    todo.appendleft(task)
                    return list(in_flight.values())
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                except Exception as exc:  # e.g. a result that could not be pickled back
                    result = worker_failure(in_flight[future].repository, _describe(exc))
                del in_flight[future]
                on_result(result)
            if broken:
                return list(in_flight.values())
    return []


def _run_alone(task: RepoTask, on_result: OnResult) -> None:
    started = time.perf_counter()
    started_at = now_iso()
    with _pool(1) as pool:
        try:
            result = _submit(pool, task).result()
        except BrokenProcessPool:
            result = worker_failure(
                task.repository,
                "the worker process died while running this repository "
                "(killed, out of memory, or a crash)",
                duration_s=round(time.perf_counter() - started, 4),
                started_at=started_at,
            )
        except Exception as exc:
            result = worker_failure(task.repository, _describe(exc))
    result.attempts = 2
    on_result(result)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
