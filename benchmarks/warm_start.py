"""Warm starts against cold ones, whole processes, printed as JSON.

    .venv/bin/python benchmarks/warm_start.py [--runs N] [--calls N]

A warm server is started for the run (in a private runtime folder of its own, as
``XDG_RUNTIME_DIR``) and stopped at the end; the cold runs have ``CODEMODE_WARM=0``.
Runs alternate (node, cold, warm, ...) so that the machine's load falls on each alike.

- ``hello``: ``interpreter run hello.js`` cold and warm, and ``node hello.js``;
- ``exec``: one ``interpreter exec --code-mode`` turn against the scripted model server
  whose program makes no call (``no_calls``) and CALLS sandboxed shell calls
  (``calls``), cold and warm;
- ``mcp_initialize``: from starting ``interpreter mcp-server`` to its ``initialize``
  answer, cold and warm;
- ``run_hello_first``: ``interpreter run hello.js`` with warm starts on (the default) and
  no server yet: the cold start that leaves one (each in a runtime folder of its own,
  the server stopped after);
- ``server``: the idle server's memory (RSS and PSS) and what its first start costs
  (the seconds from its start to listening, and its CPU);
- ``python_floor``: ``python -c pass`` and ``python -I -S -c pass`` (no site, no path
  set-up), the start every launcher pays before its first line;
- ``launcher_imports``: ``python -c`` importing what the launcher imports before it
  connects (``codemode.launch``, ``codemode.warm.place``, ``codemode.warm.client``).

Each warm figure is taken as a command typed after a pause is served: the server has
had time to make its spare ready (``_quiet``); ``*_warm_back_to_back`` is the same
command run again at once, as a script's loop runs them (no spare: a fork per caller).

``--only hello,mcp`` measures some of them (``hello``, ``mcp``, ``exec``).

Each figure is the median wall time in ms; ``ratios`` divides them. ``load_average`` says
how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from exec_startup import program, script

from codemode.warm.server import QUIET_S
from codemode_testkit.scripted_server import ScriptedModelServer

VENV_BIN = Path(sys.executable).parent
INTERPRETER = str(VENV_BIN / "interpreter")


def _timed(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes = b"") -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, timeout=300)
    took = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {done.returncode}: {done.stderr[-2000:]!r}")
    return took


def _exec_turn(calls: int, env: dict[str, str], ws: str) -> float:
    with ScriptedModelServer(script(program(calls))) as server:
        argv = [
            INTERPRETER, "exec", "--code-mode", "--full-auto", "-C", ws, "-m", "bench-model",
            "-c", "model_provider=scripted",
            "-c", f"model_providers.scripted.base_url={server.base_url}",
            "-c", "model_providers.scripted.wire_api=responses",
            "run the program",
        ]  # fmt: skip
        took = _timed(argv, env, ws)
        if len(server.requests) != 2:
            raise SystemExit(f"expected 2 model requests, saw {len(server.requests)}")
        return took


_INITIALIZE = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}) + "\n").encode()  # fmt: skip


def _mcp_initialize(env: dict[str, str], ws: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([INTERPRETER, "mcp-server"], env=env, cwd=ws, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = (time.perf_counter() - t0) * 1000
    proc.stdin.close()
    proc.wait(60)
    if b'"result"' not in line:
        raise SystemExit(f"mcp-server answered {line[:300]!r}")
    return took


def _server_facts(path: str) -> dict[str, float]:
    from codemode.warm import place

    pid = place.serving(path)
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                found["rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    found["pss_mb"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    found["cpu_ms_so_far"] = round((int(fields[11]) + int(fields[12])) * 1000 / ticks, 1)
    return found


def _start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, float]:
    from codemode.warm import start

    # Asked of a process started with ``env``: its Python options (-B from
    # PYTHONDONTWRITEBYTECODE...) are part of the key, and this one's may differ.
    path = subprocess.run(
        [sys.executable, "-c", "from codemode.warm import place; print(place.socket_path())"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "codemode.launch", "serve", path, "0"],
                            env=start.server_environment(env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            close_fds=True, start_new_session=True, cwd="/")  # fmt: skip
    while not os.path.exists(path):
        if proc.poll() is not None or time.perf_counter() - t0 > 120:
            raise SystemExit("the warm server did not start")
        time.sleep(0.005)
    return proc, path, (time.perf_counter() - t0) * 1000


def _first_start(env: dict[str, str], ws: str) -> float:
    """A cold command that finds no server and leaves one (then stopped)."""
    from codemode.warm import place

    runtime = tempfile.mkdtemp(prefix="cmw-first-")
    first = {k: v for k, v in env.items() if k != "CODEMODE_WARM"}  # the default: on
    first["XDG_RUNTIME_DIR"] = runtime
    try:
        took = _timed([INTERPRETER, "run", "hello.js"], first, ws)
        locks = list(Path(runtime).glob("codemode/warm-*.sock.lock"))
        if len(locks) != 1:
            raise SystemExit("the first command left no server")
        path = str(locks[0])[: -len(".lock")]
        deadline = time.monotonic() + 60
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)  # (it imports once the first command has ended)
        pid = place.serving(path)
        if pid > 0:
            os.kill(pid, 15)
            while place.serving(path) and time.monotonic() < deadline:
                time.sleep(0.02)
        return took
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def _quiet() -> None:
    """As between two commands a person (or an agent) runs: the server has been quiet
    long enough to fork its spare (``codemode.warm.server.QUIET_S``) and make it ready.
    A ``*_back_to_back`` figure is the same command again at once: no spare, a fork."""
    time.sleep(QUIET_S + 0.5)


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", default="hello,mcp,exec")
    args = parser.parse_args()
    only = set(args.only.split(","))
    load_before = os.getloadavg()
    runtime = tempfile.mkdtemp(prefix="cmw-bench-")
    ws = tempfile.mkdtemp(prefix="warm-bench-ws-")
    home = tempfile.mkdtemp(prefix="warm-bench-home-")
    Path(ws, "hello.js").write_text('console.log("hello");\n')
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime, CODEMODE_HOME=home, CODEMODE_WARM="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package has it
    cold = dict(env, CODEMODE_WARM="0")
    server, path, ready_ms = _start_server(env)
    samples: dict[str, list[float]] = {}

    def take(name: str, took: float) -> None:
        samples.setdefault(name, []).append(took)

    try:
        idle = _server_facts(path)
        node = shutil.which("node")
        _timed([INTERPRETER, "run", "hello.js"], env, ws)  # first use of each path
        _timed([INTERPRETER, "run", "hello.js"], cold, ws)
        python = [sys.executable]
        launcher = "import codemode.launch, codemode.warm.place, codemode.warm.client"
        for _ in range(args.runs):
            take("python_pass", _timed([*python, "-c", "pass"], env, ws))
            take("python_isolated_pass", _timed([*python, "-I", "-S", "-c", "pass"], env, ws))
            take("launcher_imports", _timed([*python, "-c", launcher], env, ws))
            if "hello" in only:
                hello = [INTERPRETER, "run", "hello.js"]
                if node:
                    take("node_hello", _timed([node, "hello.js"], env, ws))
                take("run_hello_cold", _timed(hello, cold, ws))
                _quiet()
                take("run_hello_warm", _timed(hello, env, ws))
                take("run_hello_warm_back_to_back", _timed(hello, env, ws))
                take("run_hello_first", _first_start(env, ws))
            if "mcp" in only:
                take("mcp_initialize_cold", _mcp_initialize(cold, ws))
                _quiet()
                take("mcp_initialize_warm", _mcp_initialize(env, ws))
                take("mcp_initialize_warm_back_to_back", _mcp_initialize(env, ws))
            if "exec" in only:
                take("exec_no_calls_cold", _exec_turn(0, cold, ws))
                _quiet()
                take("exec_no_calls_warm", _exec_turn(0, env, ws))
                take("exec_no_calls_warm_back_to_back", _exec_turn(0, env, ws))
                take("exec_calls_cold", _exec_turn(args.calls, cold, ws))
                _quiet()
                take("exec_calls_warm", _exec_turn(args.calls, env, ws))
        from codemode.warm import place

        served = place.served(path)
    finally:
        server.terminate()
        server.wait(30)
        for folder in (runtime, ws, home):
            shutil.rmtree(folder, ignore_errors=True)
    figures = {name: _median(values) for name, values in samples.items()}
    ratios = {}
    for name in ("run_hello", "exec_no_calls", "exec_calls", "mcp_initialize"):
        if f"{name}_warm" in figures:
            ratios[f"{name}_warm_over_cold"] = round(
                figures[f"{name}_warm"] / figures[f"{name}_cold"], 2)  # fmt: skip
    if "run_hello_first" in figures:
        ratios["run_hello_first_over_cold"] = round(
            figures["run_hello_first"] / figures["run_hello_cold"], 2)  # fmt: skip
    if "node_hello" in figures:
        for mode in ("warm", "cold"):
            over = figures[f"run_hello_{mode}"] / figures["node_hello"]
            ratios[f"run_hello_{mode}_over_node"] = round(over, 2)
    print(json.dumps({
        "runs": args.runs, "calls": args.calls, "medians_ms": figures, "ratios": ratios,
        "server": {"ready_ms": round(ready_ms, 1), "idle": idle, "served": served},
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
