"""An engine worker booted ahead (a warm spare boots one for a code-mode host, `run` or
`exec` before any caller is known) must be, once adopted, the worker a cold start would
have made: the adopting process's resource limits, not those of the process that booted
it; the limits the worker sets on itself (its memory backstop, no core file) stay. Fails
if the worker is handed over as it was booted: directly (``prestart.adopt``) and through
a real warm server's `run`."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from warm_support import INTERPRETER, real_server, served, warm_env

from codemode.warm import place

# Boots a worker with the limits it was started with, then lowers its own limits as a
# caller's would be (the spare becoming its caller's process), then adopts the worker.
ADOPT = """
import json, resource, sys, time
from codemode.js_runtime import prestart

memory = 64 * 1024 * 1024
prestart.spawn_early("quickjs", memory)
time.sleep(0.5)  # booted (or booting): the limits are the booting process's
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 333), min(hard, 4444)))
resource.setrlimit(resource.RLIMIT_NPROC, (4321, 4321))
worker = prestart.adopt("quickjs", memory)
print(json.dumps({"pid": worker.pid if worker else None}), flush=True)
sys.stdin.read()  # held until the test has looked
"""


def _limits(pid: int) -> dict[str, str]:
    found = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]:
        name = line[:26].strip()
        found[name] = " ".join(line[26:].split()[:2])
    return found


def test_an_adopted_worker_has_its_adopters_limits() -> None:
    proc = subprocess.Popen([sys.executable, "-c", ADOPT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        pid = json.loads(proc.stdout.readline())["pid"]
        assert pid, "the worker booted ahead was not adopted"
        limits = _limits(pid)
        assert limits["Max open files"] == "333 4444"
        assert limits["Max processes"] == "4321 4321"
        # What the worker sets on itself stays its own.
        assert limits["Max core file size"] == "0 0"
        assert limits["Max data size"] != "unlimited unlimited"
    finally:
        proc.stdin.close()
        proc.wait(30)


_BOOT_MARK = "codemode.js_runtime.worker import main"
# Long enough to find the worker and read its limits while the program runs.
_BUSY = "const t = Date.now(); while (Date.now() - t < 4000) {}\nconsole.log('done');\n"


def _workers_below(server: int) -> list[int]:
    """Engine workers whose parent is a run of this server."""
    runs = {int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == server}
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if _BOOT_MARK in cmdline and _parent(pid) in runs:
            found.append(pid)
    return found


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _open_files_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return " ".join(line.split()[3:5])
    raise AssertionError("no open files limit")


def _started_s_ago(pid: int) -> float:
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - ticks / os.sysconf("SC_CLK_TCK")


def _fewer_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 333), min(hard, 4444)))


def test_the_spares_engine_worker_gets_the_callers_limits(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    (tmp_path / "quick.js").write_text("console.log('quick');\n")
    (tmp_path / "busy.js").write_text(_BUSY)
    with real_server(env, tmp_path / "server.log") as sock:
        server = place.serving(sock)
        assert server
        for _ in range(2):  # a `run`: the next spare is made ready for programs
            done = subprocess.run([INTERPRETER, "run", "quick.js"], env=env, cwd=tmp_path,
                                  capture_output=True, timeout=120)  # fmt: skip
            assert done.returncode == 0, done
        time.sleep(2)  # the spare is forked once the server has been quiet a while
        before = served(sock)
        proc = subprocess.Popen([INTERPRETER, "run", "busy.js"], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, preexec_fn=_fewer_files)  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            workers: list[int] = []
            while not workers and time.monotonic() < deadline and proc.poll() is None:
                workers = _workers_below(server)
                time.sleep(0.05)
            assert workers, "no engine worker found below the warm run"
            # Booted ahead, by the spare (else this test proves nothing).
            assert _started_s_ago(workers[0]) > 1.0
            assert _open_files_limit(workers[0]) == "333 4444"
        finally:
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and b"done" in out
        assert served(sock) == before + 1
