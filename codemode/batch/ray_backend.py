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

On a cluster, every node needs codemode installed (``pip install 'codemode[ray]'``)
and must see the repositories at the same paths (a shared filesystem); the script's
source travels with each task.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from codemode.batch.models import RepoResult, RepoTask, worker_failure
from codemode.batch.worker import run_repository

OnResult = Callable[[RepoResult], None]


# Ray reads this at import: "0" makes a local instance use 127.0.0.1 as its node address
# and bind every server there, instead of this machine's network address.
_LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_OBJECT_STORE_BYTES = 256 * 1024 * 1024
_AUTH_MODE = "RAY_AUTH_MODE"


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
    tasks: list[RepoTask], jobs: int, on_result: OnResult, address: str | None = None
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
            ray.init(address=address, **quiet)
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
        remote = ray.remote(num_cpus=1, max_retries=1)(run_repository)
        refs = {remote.remote(task): task for task in tasks}
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    on_result(_collect(ray, ref, refs[ref]))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        ray.shutdown()


def _collect(ray: Any, ref: Any, task: RepoTask) -> RepoResult:
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        # The task's process died (twice, counting Ray's retry) or the node was lost.
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return worker_failure(task.repository, f"Ray task failed: {first}")
