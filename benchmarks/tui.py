"""Interactive-session figures, printed as one JSON object.

    .venv/bin/python benchmarks/tui.py [--quick]

- prompt_ready_s: `interpreter` started in a pseudo-terminal until its input line is
  drawn (against the scripted model server; median);
- first_request_ms: the first prompt sent (Enter, after TYPING_S at the input line, as a
  person typing it) until the model request reaches the scripted server (median): the
  interactive session always starts cold, and makes its model client while its user
  types (``Transport.prepare``);
- undo snapshots on a generated tree of FILES files of 4 KB: prepare (reads and copies
  everything; runs in the background at session start), begin_turn after it (a stat
  walk), and end_turn after a turn that changed 10 files (medians, ms).

Targets: prompt ready <= 1.5 s; begin_turn and end_turn on 5,000 files <= 150 ms each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pexpect

from codemode.tui.snapshots import Snapshots
from codemode_testkit.scripted_server import ScriptedModelServer

INTERPRETER = Path(sys.executable).parent / "interpreter"
TYPING_S = 2.0


def _session_args(tmp: str, server: ScriptedModelServer) -> tuple[dict[str, str], list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(CODEMODE_HOME=tmp, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    flags = [
        "-c",
        "model_provider=scripted",
        "-c",
        f"model_providers.scripted.base_url={server.base_url}",
        "--model",
        "m",
    ]
    return env, flags


def first_request(runs: int) -> float:
    times = []
    for _ in range(runs):
        reply = [{"text": "done"}]
        with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(reply) as server:
            env, flags = _session_args(tmp, server)
            child = pexpect.spawn(str(INTERPRETER), flags, cwd=tmp, env=env, encoding="utf-8")
            child.expect("›", timeout=60)
            time.sleep(TYPING_S)
            start = time.perf_counter()
            child.send("go\r")
            while not server.requests:
                if time.perf_counter() - start > 60:
                    raise SystemExit("the first request never reached the server")
                time.sleep(0.001)
            times.append(time.perf_counter() - start)
            child.expect("done", timeout=60)
            _end(child)
    return statistics.median(times)


def _end(child: pexpect.spawn) -> None:
    """Ctrl-D at the input line, again until the session ends (one typed before the
    line is drawn again can be swallowed)."""
    for _ in range(60):
        child.sendcontrol("d")
        if child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=1) == 0:
            break
    child.close()


def prompt_ready(runs: int) -> float:
    times = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer([]) as server:
        env, flags = _session_args(tmp, server)
        for _ in range(runs):
            start = time.perf_counter()
            child = pexpect.spawn(str(INTERPRETER), flags, cwd=tmp, env=env, encoding="utf-8")
            child.expect("›", timeout=60)
            times.append(time.perf_counter() - start)
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=60)
            child.close()
    return statistics.median(times)


def snapshot_figures(files: int, runs: int) -> dict[str, float]:
    first, again, end = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "repo"
            for i in range(files):
                d = root / f"pkg{i % 50}"
                d.mkdir(parents=True, exist_ok=True)
                (d / f"m{i}.py").write_bytes(os.urandom(2048).hex().encode())
            snaps = Snapshots(root)
            t = time.perf_counter()
            snaps.prepare()
            first.append(time.perf_counter() - t)
            t = time.perf_counter()
            snaps.begin_turn()
            again.append(time.perf_counter() - t)
            for i in range(10):
                (root / f"pkg{i % 50}" / f"m{i}.py").write_text("changed\n")
            t = time.perf_counter()
            snaps.end_turn()
            end.append(time.perf_counter() - t)
            snaps.close()
    return {
        "files": files,
        "prepare_ms": round(statistics.median(first) * 1000, 1),
        "begin_turn_ms": round(statistics.median(again) * 1000, 1),
        "end_turn_10_changed_ms": round(statistics.median(end) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    runs = 3 if quick else 7
    result = {
        "prompt_ready_s": round(prompt_ready(runs), 3),
        "first_request_ms": round(first_request(runs) * 1000, 1),
        "snapshots": snapshot_figures(1000 if quick else 5000, 3 if quick else 5),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
