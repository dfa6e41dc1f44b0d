"""The Ray backend: one Ray task per repository, on a cluster or a local instance.

Ray places and retries the tasks; this module only submits them and collects results
as they finish. With no address it starts a private local instance with ``jobs`` CPUs,
every Ray server listening on 127.0.0.1 only and no dashboard, and shuts it down
afterwards; with an address (``ray://host:10001``, ``host:6379`` or ``auto``) it
connects to that cluster, whose own resources then decide how many tasks run at once.
A cluster that uses token authentication (``ray start`` turns it on when it finds a
token in ``~/.ray/auth_token``, which a local ``ray.init()`` leaves behind) needs
``RAY_AUTH_MODE=token`` for an explicit address: Ray sends its token on its own only to
a cluster it finds itself (``auto``).

Nothing is assumed of the cluster's nodes but Ray and codemode's dependencies in
their Python: codemode itself reaches them through Ray's runtime environment
(``py_modules``), and no filesystem is shared. Each repository travels with its task
as an archive (``shipping.py``); the worker runs the script in a copy of it and sends
back its report line and the journal of what changed, which the driver applies all or
nothing, as for the local pool. Before any repository runs, a pre-flight task on every
node checks that codemode can run there and names what is missing.

Ray's own retries are off: a task whose worker process or node died is resubmitted
here, once, from the same archive (so a retry starts from the repository's original
state), and counted in the report line's ``attempts``. A task that failed for another
reason is reported with its real cause, in one line without terminal codes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from codemode.batch.models import RepoResult, RepoTask, now_iso, worker_failure
from codemode.batch.ray_checks import describe_failure, is_worker_death, preflight
from codemode.batch.shipping import pack
from codemode.batch.worker import run_repository

OnResult = Callable[[RepoResult], None]


# Ray reads this at import: "0" makes a local instance use 127.0.0.1 as its node address
# and bind every server there, instead of this machine's network address.
_LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_OBJECT_STORE_BYTES = 256 * 1024 * 1024
_AUTH_MODE = "RAY_AUTH_MODE"
# Tries per repository: the first, and one more when its worker or node died.
ATTEMPTS = 2


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster could not be reached."""


def _is_loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _import_ray() -> Any:
    try:
        import ray  # lazy: Ray, only for --backend ray
    except ImportError:
        raise RayUnavailable("the Ray backend needs Ray: pip install 'codemode[ray]'") from None
    return ray


def run_ray(
    tasks: list[RepoTask],
    jobs: int,
    on_result: OnResult,
    address: str | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Submit one Ray task per repository and call ``on_result`` as each finishes."""
    if (not address or _is_loopback(address)) and "ray" not in sys.modules:
        # Also for a cluster on this machine's loopback: otherwise Ray would rewrite
        # 127.0.0.1 in the address to the machine's network address and never connect.
        os.environ.setdefault(_LOOPBACK_ONLY, "0")
    ray = _import_ray()
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if address:
            ray.init(address=address, runtime_env=_runtime_env(), **quiet)
        else:
            ray.init(
                address="local",
                num_cpus=jobs,
                include_dashboard=False,
                # Results are small; Ray's default reserves 30% of the machine's memory.
                object_store_memory=_OBJECT_STORE_BYTES,
                _node_ip_address="127.0.0.1",
                **quiet,
            )
    except Exception as exc:
        where = address or "a local instance"
        hint = ""
        if address and address != "auto" and os.environ.get(_AUTH_MODE) is None:
            # Ray sends its token only to a cluster it finds by itself ("auto"), never
            # to an address it is given (see the module's docstring).
            hint = (
                f" (if the cluster uses token authentication, set {_AUTH_MODE}=token and "
                "provide the token: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
            )
        raise RayUnavailable(f"cannot start Ray on {where}: {exc}{hint}") from None
    try:
        problems = preflight(ray)
        if problems:
            raise RayUnavailable("pre-flight check failed, no repository was run: " + problems)
        _run_all(ray, tasks, jobs, on_result, stop)
    finally:
        ray.shutdown()


def _runtime_env() -> dict[str, Any]:
    """codemode's own package, shipped to every worker (its dependencies must be
    there: the pre-flight check names any that is not)."""
    import codemode

    return {
        "py_modules": [codemode],
        "excludes": ["__pycache__", "*.pyc"],
        # gRPC (in every Ray worker) with its fork handlers on can hang or abort a child
        # forked to start a command confined by Landlock (codemode.sandbox.confinement.grpc_fork).
        "env_vars": {"GRPC_ENABLE_FORK_SUPPORT": "0"},
    }


def _run_all(
    ray: Any, tasks: list[RepoTask], jobs: int, on_result: OnResult, stop: Callable[[], bool]
) -> None:
    """Submit the tasks (a bounded number at a time: each carries its repository's
    archive) and hand each result to ``on_result``, resubmitting a dead worker's task."""
    remote = ray.remote(num_cpus=1, max_retries=0)(run_repository)
    window = max(2 * jobs, 2 * int(ray.cluster_resources().get("CPU", 1)))
    todo = list(reversed(tasks))
    in_flight: dict[Any, tuple[RepoTask, int, str]] = {}

    def submit(task: RepoTask, attempt: int) -> None:
        shipped = task if task.archive is not None else _with_archive(task)
        in_flight[remote.remote(shipped)] = (shipped, attempt, now_iso())

    try:
        while (todo and not stop()) or in_flight:
            while todo and len(in_flight) < window and not stop():
                submit(todo.pop(), 1)
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                task, attempt, started_at = in_flight.pop(ref)
                try:
                    result: RepoResult = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    if is_worker_death(ray, exc) and attempt < ATTEMPTS:
                        submit(task, attempt + 1)
                        continue
                    message = describe_failure(ray, exc)
                    result = worker_failure(task.repository, message, started_at=started_at)
                result.attempts = attempt
                on_result(result)
    except BaseException:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        raise


def _with_archive(task: RepoTask) -> RepoTask:
    from dataclasses import replace
    from pathlib import Path

    return replace(task, archive=pack(Path(task.repository)))
