"""`interpreter exec --code-mode` starts its engine worker before the command line's
imports (``commands.exec_early``), and the session adopts that worker: the turn runs its
program in it, no worker is left unadopted and no spare is started beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codemode.commands import exec_early
from codemode_testkit.scripted_server import ScriptedModelServer

# Runs `interpreter exec` in this process after the early start, and reports whether the
# early worker was handed over and which worker pid the program saw.
DRIVER = """
import json, sys
from codemode.commands import exec_early
from codemode.js_runtime import prestart
argv = json.loads(sys.argv[1])
started = exec_early.prestart_for(argv)
early_pid = prestart._early[0][2].pid if prestart._early else None
from codemode.cli import _main
try:
    _main(argv)
except SystemExit as exc:
    status = exc.code
else:
    status = 0
from codemode.js_runtime.worker_process import POOL
spares = sum(len(v) for v in POOL._spares.values())
print(json.dumps({"started": started, "left": len(prestart._early), "status": status,
                  "early_pid": early_pid, "spares": spares}))
"""


def test_the_session_adopts_the_early_worker(tmp_path: Path) -> None:
    program = "console.log('ran')"
    script = [{"tool_calls": [{"name": "exec", "freeform": True, "arguments": program}]},
              {"text": "done"}]  # fmt: skip
    with ScriptedModelServer(script) as server:
        argv = ["exec", "--code-mode", "--full-auto", "-C", str(tmp_path), "-m", "m",
                "-c", "model_provider=scripted",
                "-c", f"model_providers.scripted.base_url={server.base_url}",
                "-c", "model_providers.scripted.wire_api=responses", "go"]  # fmt: skip
        env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
        out = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argv)], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report["started"] and report["early_pid"], report
        assert report["status"] == 0 and report["left"] == 0, (report, out.stderr[-2000:])
        # Its programs run one after another on that worker: no spare boots beside it.
        assert report["spares"] == 0, report
        assert "ran" in json.dumps(server.requests[1].body)


def test_only_a_code_mode_turn_starts_one_early() -> None:
    assert not exec_early.prestart_for(["exec", "hi"])
    assert not exec_early.prestart_for(["exec", "--code-mode", "--help"])
    assert not exec_early.prestart_for(["exec", "--code-mode", "--repos=a,b", "hi"])
    assert not exec_early.prestart_for(["run", "--code-mode", "x.js"])
    assert not exec_early.prestart_for(["exec", "--code-mode", "-c", "engine=lua", "hi"])
