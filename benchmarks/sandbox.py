"""Sandbox figures: what confinement costs a shell call, printed as one JSON object.

    .venv/bin/python benchmarks/sandbox.py [--quick]

- call_ms: one trivial command (`true`) through the shell tool (ToolRegistry.invoke, policy
  check included), median, for each way of running it that works here: plain (no
  sandbox session), danger-full-access (policy check and environment scrub only),
  bubblewrap without and with seccomp, Landlock without and with seccomp;
- program_ms: one code-mode program making 50 such calls under the default confinement,
  sequentially and with Promise.all (median of runs).

Targets: a confined call (the default backend, with seccomp) <= 8 ms median on a quiet
machine; 50 confined calls <= 1 s sequential and <= 0.5 s with Promise.all. The
confined variants include everything a call costs: the protected-path binds, the git
guard before and after, and the watch for new ``.codemode/`` folders. ``--repo`` runs
them in a git repository (with a submodule's git directory) instead of an empty folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.host import ToolHost
from codemode.sandbox.confine import choose_backend, probe
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry

TARGETS = {"confined_call_ms": 8.0, "sequential_50_ms": 1000.0, "parallel_50_ms": 500.0}


def variants() -> dict[str, dict[str, Any] | None]:
    found = probe()
    out: dict[str, dict[str, Any] | None] = {
        "plain": None,
        "danger-full-access": {"sandbox_mode": "danger-full-access"},
    }
    if found.bubblewrap is None:
        out["bubblewrap"] = {"backend": "bubblewrap", "seccomp": False}
        if found.seccomp is None:
            out["bubblewrap+seccomp"] = {"backend": "bubblewrap"}
    if found.landlock is None:
        out["landlock"] = {"backend": "landlock", "seccomp": False}
        if found.seccomp is None:
            out["landlock+seccomp"] = {"backend": "landlock"}
    return out


async def call_ms(ws: Path, settings: dict[str, Any] | None, n: int) -> float:
    registry = builtin_registry()
    sandbox = None
    if settings is not None:
        sandbox = SandboxSession(ws, SandboxSettings(approval_policy="never", **settings))
    ctx = ToolContext(workspace=ws, sandbox=sandbox)
    args = {"command": "true"}
    await registry.invoke("shell", args, ctx)  # warm: imports, probes, parser
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = await registry.invoke("shell", args, ctx)
        times.append((time.perf_counter() - t) * 1000)
        assert r["exit_code"] == 0, r
    return round(statistics.median(times), 2)


SEQUENTIAL = "for (let i = 0; i < 50; i++) await tools.shell({command: 'true'});"
PARALLEL = "await Promise.all(Array.from({length: 50}, () => tools.shell({command: 'true'})));"


async def program_ms(ws: Path, code: str, runs: int) -> float:
    host = ToolHost(ws, sandbox=SandboxSettings(approval_policy="never"))
    try:
        await host.execute("await tools.shell({command: 'true'})")
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            r = await host.execute(code)
            times.append((time.perf_counter() - t) * 1000)
            assert r.ok, r.error
    finally:
        host.close()
    return round(statistics.median(times), 1)


def make_repo(ws: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "modules" / "sub" / "hooks").mkdir(parents=True)
    (ws / ".git" / "modules" / "sub" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "modules" / "sub" / "config").write_text("[core]\n")


async def main(quick: bool, repo: bool = False) -> dict[str, Any]:
    n, runs = (10, 2) if quick else (60, 5)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        if repo:
            make_repo(ws)
        calls = {name: await call_ms(ws, s, n) for name, s in variants().items()}
        default = choose_backend(SandboxSettings())
        programs = {
            "sequential_50_ms": await program_ms(ws, SEQUENTIAL, runs),
            "parallel_50_ms": await program_ms(ws, PARALLEL, runs),
        }
    confined = calls.get(f"{default}+seccomp", calls.get(default))
    return {
        "backends": probe().to_json(),
        "default_backend": default,
        "call_ms": calls,
        "program_ms": {"backend": default, **programs},
        "targets": TARGETS,
        "met": {
            "confined_call_ms": confined is not None and confined <= TARGETS["confined_call_ms"],
            "sequential_50_ms": programs["sequential_50_ms"] <= TARGETS["sequential_50_ms"],
            "parallel_50_ms": programs["parallel_50_ms"] <= TARGETS["parallel_50_ms"],
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--repo", action="store_true", help="run in a git repository")
    ns = parser.parse_args()
    json.dump(asyncio.run(main(ns.quick, ns.repo)), sys.stdout, indent=2)
    print()
