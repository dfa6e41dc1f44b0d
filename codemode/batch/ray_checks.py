"""What the Ray backend checks before a run and says after a failure.

``preflight`` runs one small task on every alive node with CPUs (pinned to it) that
imports what a batch worker needs and looks for what the sandbox needs, and returns
one line naming each node's problems (empty: all well). ``describe_failure`` turns a
Ray error into its real cause in one line: the exception raised in the task (not Ray's
``ray::run_repository()`` banner), without the terminal colour codes Ray puts there.
"""

from __future__ import annotations

import re
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# The last "SomeError: message" line of a traceback is its cause.
_CAUSE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b.*")
PREFLIGHT_TIMEOUT_S = 120.0


def _probe() -> dict[str, str]:
    """On a node: what a batch worker would miss there (empty: nothing)."""
    import platform
    import shutil

    missing: dict[str, str] = {"node": platform.node()}
    for module in ("codemode.batch.worker", "codemode.host.tool_host", "quickjs", "pydantic"):
        try:
            __import__(module)
        except Exception as exc:
            missing[module] = f"{type(exc).__name__}: {exc}"
    if shutil.which("git") is None:
        missing["git"] = "git is not on PATH (the worker's copy of a repository keeps .git)"
    return missing


def preflight(ray: Any) -> str:
    """Problems found on the cluster's nodes, one line; empty when there are none."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    refs = {
        probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(): n
        for n in nodes
    }
    problems: list[str] = []
    for ref, node in refs.items():
        where = f"node {node.get('NodeManagerAddress', '?')} ({node['NodeID'][:8]})"
        try:
            found = ray.get(ref, timeout=PREFLIGHT_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            problems.append(
                f"{where}: no answer in {PREFLIGHT_TIMEOUT_S:.0f} s (the node cannot start a "
                "worker with codemode's runtime environment: see its raylet and "
                "runtime_env agent logs)"
            )
            continue
        except Exception as exc:
            problems.append(f"{where}: {describe_failure(ray, exc)}")
            continue
        found.pop("node", None)
        problems += [f"{where}: {what}: {why}" for what, why in found.items()]
    if not nodes:
        problems.append("the cluster has no alive node with CPUs")
    return "; ".join(problems)


def is_worker_death(ray: Any, exc: BaseException) -> bool:
    """Whether the task's worker process or its node died (worth one more try)."""
    deaths = tuple(
        getattr(ray.exceptions, name)
        for name in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError",
                     "ObjectLostError", "OwnerDiedError")
        if hasattr(ray.exceptions, name)
    )  # fmt: skip
    return isinstance(exc, deaths)


def describe_failure(ray: Any, exc: BaseException) -> str:
    """The real cause of a Ray error, one line, no terminal codes."""
    from codemode.terminal.control_chars import visible

    if is_worker_death(ray, exc):
        kind = type(exc).__name__
        return f"Ray worker died while running this repository ({kind}), twice"
    cause = getattr(exc, "cause", None)
    text = _ANSI.sub("", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = [line for line in lines if _CAUSE.match(line)]
    if found:
        line = found[-1]
    elif isinstance(cause, BaseException) and str(cause):
        line = f"{type(cause).__name__}: {_ANSI.sub('', str(cause))}"
    else:
        line = lines[-1] if lines else type(exc).__name__
    return "Ray task failed: " + visible(line)[:2000]
