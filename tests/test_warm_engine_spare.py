"""An engine worker booted ahead (a warm spare boots one for a code-mode host before any
caller is known) must be, once adopted, the worker a cold start would have made: the
adopting process's resource limits, not those of the process that booted it; the limits
the worker sets on itself (its memory backstop, no core file) stay. Fails if the worker
is handed over as it was booted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
