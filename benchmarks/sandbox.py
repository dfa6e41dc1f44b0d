"""Sandbox figures: what confinement costs a shell call, printed as one JSON object.

    .venv/bin/python benchmarks/sandbox.py [--quick]

- call_ms: one trivial command (`true`) through the shell tool (ToolRegistry.invoke, policy
  check included), median, for each way of running it that works here: plain (no
  sandbox session), danger-full-access (policy check and environment scrub only),
  bubblewrap without and with seccomp (in the session's command server), bubblewrap with
  seccomp started anew for each command (``command_server = false``), Landlock without
  and with seccomp;
- call_cpu_ms: the CPU time of those calls (codemode's and the processes it waited
  for), median: what a call costs whatever the load (``load_average`` says how busy
  the machine was while the wall times were taken). In the command server the commands
  are the server's children, not codemode's: their CPU time reaches codemode's
  accounts only when the session ends, so there this is codemode's own side of a call
  (``benchmarks/codex_compare.py`` times whole processes, where it is all counted);
- program_ms: one code-mode program making 50 such calls under the default confinement,
  sequentially and with Promise.all (median of runs);
- policy_ms: the execpolicy deciding one 50-command script (pipelines, wrappers, git,
  sed, find, redirections, a loop, a substitution), median of runs, rules loaded once.

Targets: a confined call (the default backend, with seccomp, through the command
server) <= 3 ms median on a quiet machine; 50 confined calls <= 200 ms sequential and
<= 0.5 s with Promise.all; deciding a 50-command script <= 5 ms median. The
confined variants include everything a call costs: the protected-path binds, the git
guard before and after, and the watch for new ``.codemode/`` folders. ``--repo`` runs
them in a git repository (with a submodule's git directory) instead of an empty folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.host import ToolHost
from codemode.sandbox.confinement.confine import decide_backend, probe
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry

TARGETS = {
    "confined_call_ms": 3.0,
    "sequential_50_ms": 200.0,
    "parallel_50_ms": 500.0,
    "policy_50_commands_ms": 5.0,
}

# Fifty simple commands, the kind an agent writes: deciding them is one policy figure.
POLICY_SCRIPT = "\n".join(
    [
        "cd src && ls -la | head -20",
        "git status --short && git log --oneline -5",
        "grep -rn TODO . | wc -l",
        "sed -n '1,40p' main.py",
        "find . -name '*.py' -newer setup.cfg | sort | uniq -c",
        "rg -n --glob '*.py' 'def main' src",
        "cat README.md | tr a-z A-Z > /dev/null",
        'for f in a b c; do echo "$f"; wc -c "$f"; done',
        'x=$(git rev-parse HEAD); echo "$x"',
        "env LANG=C sort -k2,2n data.csv | head -n 5",
        "timeout 5 nice -n 5 git diff --stat HEAD~1",
        "mkdir -p out && echo done > out/log.txt",
        "rm -rf build dist/*.whl",
        "python3 -m pytest -q tests/test_x.py || true",
        "git push origin main",
        "awk '{print $1}' access.log | sort | uniq -c | sort -rn | head",
        "xargs -0 cat < list.txt",
        "jq .name package.json; date +%s; pwd; whoami",
        "diff <(sort a.txt) <(sort b.txt)",
        "test -f Makefile && make -n",
        'basename "$PWD"; dirname /a/b; realpath .; stat -c %s f',
        "git branch -a; git remote -v; echo ok; true",
    ]
)


def policy_ms(runs: int) -> dict[str, Any]:
    from codemode.sandbox.execpolicy.policy import Policy, PolicyContext

    ws = Path(tempfile.gettempdir())
    policy = Policy()
    ctx = PolicyContext(cwd=ws, writable_roots=(ws,))
    ev = policy.evaluate(POLICY_SCRIPT, ctx)  # warm: tree-sitter, tables
    times, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.thread_time()
        policy.evaluate(POLICY_SCRIPT, ctx)
        cpu.append((time.thread_time() - c) * 1000)
        times.append((time.perf_counter() - t) * 1000)
    return {
        "simple_commands": len(ev.verdicts),
        "decision": ev.decision,
        "median_ms": round(statistics.median(times), 2),
        # CPU time of the deciding thread: what the wall time is on a quiet machine
        "cpu_median_ms": round(statistics.median(cpu), 2),
    }


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
            out["bubblewrap+seccomp, one per command"] = {
                "backend": "bubblewrap",
                "command_server": False,
            }
    if found.landlock is None:
        out["landlock"] = {"backend": "landlock", "seccomp": False}
        if found.seccomp is None:
            out["landlock+seccomp"] = {"backend": "landlock"}
    return out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def call_ms(ws: Path, settings: dict[str, Any] | None, n: int) -> tuple[float, float]:
    """Median wall time of one call, and median CPU time: codemode's own plus that of
    the processes it waited for (bwrap, the command). The CPU figure barely moves with
    the machine's load, so it tells what a change saved where the wall time is noise.
    (Each variant runs on its own: taking turns call by call would charge each one
    with the others' work the kernel finishes after they return, such as tearing down
    bubblewrap's namespaces.)"""
    registry = builtin_registry()
    sandbox = None
    if settings is not None:
        sandbox = SandboxSession(ws, SandboxSettings(approval_policy="never", **settings))
    ctx = ToolContext(workspace=ws, sandbox=sandbox)
    args = {"command": "true"}
    await registry.invoke("shell", args, ctx)  # warm: imports, probes, parser
    times, cpu = [], []
    try:
        for _ in range(n):
            c = time.process_time() + _children_cpu()
            t = time.perf_counter()
            r = await registry.invoke("shell", args, ctx)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() + _children_cpu() - c) * 1000)
            assert r["exit_code"] == 0, r
    finally:
        if sandbox is not None:
            sandbox.close()
    return round(statistics.median(times), 2), round(statistics.median(cpu), 2)


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
        measured = {name: await call_ms(ws, s, n) for name, s in variants().items()}
        calls = {name: wall for name, (wall, _) in measured.items()}
        calls_cpu = {name: cpu for name, (_, cpu) in measured.items()}
        default = decide_backend(SandboxSettings()).name
        programs = {
            "sequential_50_ms": await program_ms(ws, SEQUENTIAL, runs),
            "parallel_50_ms": await program_ms(ws, PARALLEL, runs),
        }
    confined = calls.get(f"{default}+seccomp", calls.get(default))
    decide = policy_ms(50 if quick else 300)
    return {
        "backends": probe().to_json(),
        "default_backend": default,
        "call_ms": calls,
        "call_cpu_ms": calls_cpu,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "program_ms": {"backend": default, **programs},
        "policy_ms": decide,
        "targets": TARGETS,
        "met": {
            "confined_call_ms": confined is not None and confined <= TARGETS["confined_call_ms"],
            "sequential_50_ms": programs["sequential_50_ms"] <= TARGETS["sequential_50_ms"],
            "parallel_50_ms": programs["parallel_50_ms"] <= TARGETS["parallel_50_ms"],
            "policy_50_commands_ms": decide["median_ms"] <= TARGETS["policy_50_commands_ms"],
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--repo", action="store_true", help="run in a git repository")
    ns = parser.parse_args()
    json.dump(asyncio.run(main(ns.quick, ns.repo)), sys.stdout, indent=2)
    print()
