"""Whole-process cost of one ``interpreter exec --code-mode`` turn, printed as JSON.

    .venv/bin/python benchmarks/exec_startup.py [--runs N] [--calls N] [--no-bytecode]

Two turns, each run N times against the scripted model server (a real HTTP server on
127.0.0.1, Responses wire) in a fresh workspace and a fresh ``CODEMODE_HOME``:

- ``no_calls``: the model's program makes no tool call (process start, session, one
  program, shutdown): what issue 14's Codex comparison pays before the first call;
- ``calls``: the program makes CALLS sandboxed ``tools.shell`` calls one after another.

Per turn: ``wall_median_ms`` and ``cpu_median_ms`` (the process and everything it started:
engine workers, sandboxes, shells, including killed workers nobody waited for, reaped
here as the child subreaper; steadier than wall time on a busy machine), plus
``python_floor`` (``python -c pass`` and ``python -c 'import pydantic, httpx'``, to tell
our own cost from the interpreter's). ``load_average`` before and after says how busy the
machine was. The bytecode cache is on (as an installed package has it) unless
``--no-bytecode``: with ``PYTHONDONTWRITEBYTECODE`` set every start compiles ~400 modules.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemode_testkit.scripted_server import ScriptedModelServer

VENV_BIN = Path(sys.executable).parent


def program(calls: int) -> str:
    if not calls:
        return 'console.log("0 calls");\n'
    return (
        f"const out = [];\nfor (let i = 0; i < {calls}; i++) {{\n"
        "  const r = await tools.shell({command: `echo call-${i}`});\n"
        "  out.push(r.output.trim());\n}\n"
        "console.log(`${out.length} calls; last: ${out[out.length - 1]}`);\n"
    )


def script(code: str) -> list[dict[str, object]]:
    return [
        {"tool_calls": [{"name": "exec", "freeform": True, "arguments": code}]},
        {"text": "done"},
    ]


def _adopt_orphans() -> bool:
    """Become the child subreaper (Linux), so that processes the turn leaves to die
    (engine workers are killed, not waited for) are reaped here and their CPU counted."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_orphans(deadline_s: float = 5.0) -> None:
    """Wait for the orphans adopted during a turn (they are dying) and reap them."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def _env(home: Path, bytecode: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["CODEMODE_HOME"] = str(home)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_turn(calls: int, bytecode: bool) -> tuple[float, float]:
    """One whole-process turn: (wall ms, CPU ms); the program's output is checked."""
    code = program(calls)
    with (
        tempfile.TemporaryDirectory() as ws,
        tempfile.TemporaryDirectory() as home,
        ScriptedModelServer(script(code)) as server,
    ):
        argv = [
            str(VENV_BIN / "interpreter"), "exec", "--code-mode", "--full-auto",
            "-C", ws, "-m", "bench-model",
            "-c", "model_provider=scripted",
            "-c", f"model_providers.scripted.base_url={server.base_url}",
            "-c", "model_providers.scripted.wire_api=responses",
            "run the program",
        ]
        cpu0, t0 = _children_cpu_ms(), time.perf_counter()
        done = subprocess.run(argv, env=_env(Path(home), bytecode), cwd=ws,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300)
        wall = (time.perf_counter() - t0) * 1000
        _reap_orphans()
        cpu = _children_cpu_ms() - cpu0
        if done.returncode != 0:
            raise SystemExit(f"exec exited {done.returncode}: {done.stderr[-2000:]}")
        if len(server.requests) != 2:
            raise SystemExit(f"expected 2 model requests, saw {len(server.requests)}")
        sent = json.dumps(server.requests[1].body.get("input"))
        expected = f"{calls} calls; last: call-{calls - 1}" if calls else "0 calls"
        if expected not in sent:
            raise SystemExit(f"program output missing {expected!r}: {sent[:500]}")
        return wall, cpu


def run_python(code: str, bytecode: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as home:
        cpu0, t0 = _children_cpu_ms(), time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=_env(Path(home), bytecode), check=True)
        return (time.perf_counter() - t0) * 1000, _children_cpu_ms() - cpu0


def medians(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_median_ms": round(statistics.median(s[0] for s in samples), 1),
        "cpu_median_ms": round(statistics.median(s[1] for s in samples), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="leave PYTHONDONTWRITEBYTECODE as the environment has it")
    args = parser.parse_args()
    bytecode = not args.no_bytecode
    orphans_counted = _adopt_orphans()
    load_before = os.getloadavg()
    run_turn(0, bytecode)  # untimed: fills the bytecode cache and the OS page cache
    samples: dict[str, list[tuple[float, float]]] = {
        "no_calls": [], "calls": [], "python_pass": [], "python_imports": []
    }
    for _ in range(args.runs):  # interleaved, so that every kind sees the same load
        samples["no_calls"].append(run_turn(0, bytecode))
        samples["calls"].append(run_turn(args.calls, bytecode))
        samples["python_pass"].append(run_python("pass", bytecode))
        samples["python_imports"].append(run_python("import pydantic, httpx", bytecode))
    print(json.dumps({
        "runs": args.runs,
        "calls": args.calls,
        "bytecode_cache": bytecode,
        # Whether the CPU of processes the turn left behind (killed engine workers,
        # reaped by nobody) is counted: they are reaped here as the child subreaper.
        "orphans_counted": orphans_counted,
        "no_calls": medians(samples["no_calls"]),
        "calls_turn": medians(samples["calls"]),
        "python_floor": {
            "pass": medians(samples["python_pass"]),
            "import_pydantic_httpx": medians(samples["python_imports"]),
        },
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
    }, indent=2))


if __name__ == "__main__":
    main()
