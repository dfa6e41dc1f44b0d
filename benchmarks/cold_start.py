"""Cold starts of codemode at several commits, side by side, printed as JSON.

    .venv/bin/python benchmarks/cold_start.py [--runs N] [--at LABEL=COMMIT ...]
                                              [--teardown-runs N]

Each ``--at`` names a commit of this repository; its tree is unpacked (``git archive``)
into a temporary folder and byte-compiled, and run with this virtual environment (the
tree first on ``PYTHONPATH``). ``now`` is always the working tree. Every command starts
cold (``CODEMODE_WARM=0``), in a fresh workspace, home and runtime folder. Within each
round the trees take turns (in a rotating order), so the machine's load falls on each
alike; each figure is the median wall time in ms of N rounds (``medians_ms``), and the
median CPU time of the whole process and everything it started (``cpu_medians_ms``,
orphans reaped here as the child subreaper: steadier than wall time on a busy machine):

- ``run_hello``: ``interpreter run hello.js`` (and ``node hello.js`` when node is here);
- ``exec_no_calls``: one ``interpreter exec --code-mode`` turn against the scripted
  model server (an ``http://`` service on 127.0.0.1) whose program makes no call;
- ``mcp_initialize``: from starting ``interpreter mcp-server`` to its ``initialize``
  answer; ``mcp_tools_list``: to its answer to the ``tools/list`` sent right after the
  handshake (what a client waits for before it can offer ``execute``);
- ``code_mode_host``: from starting ``interpreter code-mode-host --listen
  grpc+stdio://`` to its first byte after an HTTP/2 preface (it can serve);
- ``help``: ``interpreter --help``;
- ``usage_error``: ``interpreter exec --no-such-option`` (status 2).

``ratios_to_LABEL`` (and ``cpu_ratios_to_LABEL``) divides each tree's median by the first
``--at`` tree's. With
``--teardown-runs N``, ``usage_error_statuses`` counts the exit statuses of N more
usage errors per tree (a status other than 2, such as -11, is a crash at exit).
``load_average`` says how busy the machine was.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from exec_startup import _adopt_orphans, _children_cpu_ms, _reap_orphans, program, script

from codemode_testkit.scripted_server import ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
INTERPRETER = str(Path(sys.executable).parent / "interpreter")
_INITIALIZE = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}) + "\n").encode()  # fmt: skip
_LIST_TOOLS = (
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    + "\n"
    + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    + "\n"
).encode()
# The HTTP/2 client preface and an empty SETTINGS frame.
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"

Measure = Callable[[dict[str, str], str], float]


def _timed(argv: list[str], env: dict[str, str], ws: str, status: int = 0) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ws, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=300)  # fmt: skip
    took = (time.perf_counter() - t0) * 1000
    if done.returncode != status:
        raise SystemExit(f"{argv[1:3]} exited {done.returncode}: {done.stderr[-2000:]!r}")
    return took


def run_hello(env: dict[str, str], ws: str) -> float:
    return _timed([INTERPRETER, "run", "hello.js"], env, ws)


def exec_no_calls(env: dict[str, str], ws: str) -> float:
    with ScriptedModelServer(script(program(0))) as server:
        took = _timed([
            INTERPRETER, "exec", "--code-mode", "--full-auto", "-C", ws, "-m", "bench-model",
            "-c", "model_provider=scripted",
            "-c", f"model_providers.scripted.base_url={server.base_url}",
            "-c", "model_providers.scripted.wire_api=responses",
            "run the program",
        ], env, ws)  # fmt: skip
        if len(server.requests) != 2:
            raise SystemExit(f"expected 2 model requests, saw {len(server.requests)}")
    return took


def _first_line(argv: list[str], env: dict[str, str], ws: str, send: bytes) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=ws, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(send)
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], 120)[0]:
            raise SystemExit(f"{argv[1]}: no answer")
        got = os.read(proc.stdout.fileno(), 65536)
        return (time.perf_counter() - t0) * 1000, got
    finally:
        proc.stdin.close()
        proc.wait(60)


def mcp_initialize(env: dict[str, str], ws: str) -> float:
    took, got = _first_line([INTERPRETER, "mcp-server"], env, ws, _INITIALIZE)
    if b'"result"' not in got:
        raise SystemExit(f"mcp-server answered {got[:300]!r}")
    return took


def mcp_tools_list(env: dict[str, str], ws: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([INTERPRETER, "mcp-server"], env=env, cwd=ws, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        proc.stdout.readline()
        proc.stdin.write(_LIST_TOOLS)
        proc.stdin.flush()
        got = proc.stdout.readline()
        took = (time.perf_counter() - t0) * 1000
    finally:
        proc.stdin.close()
        proc.wait(60)
    if b'"execute"' not in got:
        raise SystemExit(f"mcp-server listed {got[:300]!r}")
    return took


def code_mode_host(env: dict[str, str], ws: str) -> float:
    argv = [INTERPRETER, "code-mode-host", "--listen", "grpc+stdio://"]
    took, got = _first_line(argv, env, ws, _PREFACE)
    if not got:
        raise SystemExit("code-mode-host: no answer to an HTTP/2 preface")
    return took


def help_text(env: dict[str, str], ws: str) -> float:
    return _timed([INTERPRETER, "--help"], env, ws)


def usage_error(env: dict[str, str], ws: str) -> float:
    return _timed([INTERPRETER, "exec", "--no-such-option"], env, ws, status=2)


PATHS: dict[str, Measure] = {
    "run_hello": run_hello, "exec_no_calls": exec_no_calls, "mcp_initialize": mcp_initialize,
    "mcp_tools_list": mcp_tools_list,
    "code_mode_host": code_mode_host, "help": help_text, "usage_error": usage_error,
}  # fmt: skip


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit``, unpacked under ``into`` and byte-compiled."""
    tree = into / commit
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "codemode"],
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    compileall.compile_dir(str(tree / "codemode"), quiet=1)
    return tree


# Usage errors after more or less of the command line has loaded.
_USAGE_ERRORS = (
    ["--bogus"],
    ["exec", "--no-such-option"],
    ["exec", "--code-mode", "--bogus", "hi"],
    ["run", "--no-such-option", "hello.js"],
    ["run", "--memory", "0", "hello.js"],
)


def _statuses(env: dict[str, str], ws: str, runs: int) -> dict[str, int]:
    seen: Counter[int] = Counter()
    for i in range(runs):
        argv = [INTERPRETER, *_USAGE_ERRORS[i % len(_USAGE_ERRORS)]]
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, timeout=120)
        seen[done.returncode] += 1
    return {str(status): count for status, count in sorted(seen.items())}


Figures = dict[str, dict[str, float]]


def _medians(samples: dict[str, dict[str, list[float]]], first: str) -> tuple[Figures, Figures]:
    """Each path's median per tree, and each tree's median over the ``first`` tree's."""
    medians = {name: {label: round(statistics.median(v), 1) for label, v in by.items()}
               for name, by in samples.items()}  # fmt: skip
    ratios = {name: {label: round(m / by[first], 2) for label, m in by.items() if label != first}
              for name, by in medians.items()}  # fmt: skip
    return medians, ratios


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--at", action="append", default=[], metavar="LABEL=COMMIT")
    parser.add_argument("--only", action="append", choices=sorted(PATHS), default=[])
    parser.add_argument("--teardown-runs", type=int, default=0)
    args = parser.parse_args()
    load_before = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="cold-start-bench-"))
    ws = scratch / "ws"
    ws.mkdir()
    (ws / "hello.js").write_text('console.log("hello");\n')
    base = dict(os.environ, CODEMODE_WARM="0")
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package has it
    trees: dict[str, Path] = {}
    for spec in args.at:
        label, _, commit = spec.partition("=")
        trees[label] = unpack(commit, scratch / "trees")
    trees["now"] = REPO
    envs: dict[str, dict[str, str]] = {}
    for label, tree in trees.items():
        home, runtime = scratch / "home" / label, scratch / "run" / label
        home.mkdir(parents=True)
        runtime.mkdir(parents=True, mode=0o700)
        envs[label] = dict(base, PYTHONPATH=str(tree), CODEMODE_HOME=str(home),
                           XDG_RUNTIME_DIR=str(runtime))  # fmt: skip
    paths = {name: PATHS[name] for name in args.only or PATHS}
    samples: dict[str, dict[str, list[float]]] = {n: {t: [] for t in trees} for n in paths}
    cpu: dict[str, dict[str, list[float]]] = {n: {t: [] for t in trees} for n in paths}
    _adopt_orphans()
    labels = list(trees)
    node = shutil.which("node")
    node_samples: list[float] = []
    try:
        for label in labels:  # untimed: each tree's first start (page cache, bytecode)
            for measure in paths.values():
                measure(envs[label], str(ws))
        _reap_orphans()  # what those left behind is not counted below
        for i in range(args.runs):
            order = labels[i % len(labels) :] + labels[: i % len(labels)]
            if node and "run_hello" in paths:
                node_samples.append(_timed([node, "hello.js"], base, str(ws)))
            for name, measure in paths.items():
                for label in order:
                    cpu0 = _children_cpu_ms()
                    samples[name][label].append(measure(envs[label], str(ws)))
                    _reap_orphans()
                    cpu[name][label].append(_children_cpu_ms() - cpu0)
        statuses = {label: _statuses(envs[label], str(ws), args.teardown_runs)
                    for label in labels} if args.teardown_runs else None  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first = labels[0]
    medians, ratios = _medians(samples, first)
    cpu_medians, cpu_ratios = _medians(cpu, first)
    result: dict[str, object] = {
        "runs": args.runs, "trees": {label: spec for label, spec in
                                     zip(labels, [*args.at, "working tree"], strict=True)},
        "medians_ms": medians, "ratios_to_" + first: ratios,
        "cpu_medians_ms": cpu_medians, "cpu_ratios_to_" + first: cpu_ratios,
    }  # fmt: skip
    if node_samples:
        result["node_hello_ms"] = round(statistics.median(node_samples), 1)
    if statuses is not None:
        result["usage_error_statuses"] = {"runs": args.teardown_runs, **statuses}
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
