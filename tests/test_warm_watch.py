"""A warm server that cannot watch the code it serves never serves: an upgrade would go
unseen, and every later command would run the old code. inotify's limits are really
spent here (the user's watches, or instances), inside a user namespace of the test's
own: there the limits are the namespace's (``/proc/sys/user/max_inotify_*``), so
nothing else on the machine runs short of watches meanwhile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from warm_support import INTERPRETER, warm_env

# Inside the namespace: spend the limit, run a command (cold: no server yet; it leaves
# one), wait for that server to listen or end, then run another command.
_SPENT = r"""
import json, os, socket, subprocess, sys, time
from codemode.warm import place, start
knob, value, interpreter = sys.argv[1:4]
try:
    with open("/proc/sys/user/" + knob, "w") as f:
        f.write(value)
except OSError as exc:
    print(json.dumps({"skip": f"cannot set {knob} here: {exc}"}))
    sys.exit(0)
path = place.socket_path()

def listening():
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True

def log():
    try:
        with open(path + ".log") as f:
            return f.read()
    except OSError:
        return ""

def command():
    done = subprocess.run([interpreter, "policy", "check", "--", "ls"], capture_output=True,
                          text=True, timeout=180, cwd="/")
    return done.stdout

first = command()
deadline = time.monotonic() + 150
while not listening() and not (log() and not place.serving(path)):
    if time.monotonic() > deadline:
        break
    time.sleep(0.05)
said, listened = log(), listening()
second = command()
served = place.served(path)
start.stop(path)
print(json.dumps({"first": first, "second": second, "listened": listened, "served": served,
                  "log": said}))
"""


def _user_namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                          capture_output=True, timeout=60)  # fmt: skip
    return done.returncode == 0


@pytest.mark.parametrize(("knob", "value", "why"), [
    ("max_inotify_watches", "1", "fs.inotify.max_user_watches"),  # the second folder fails
    ("max_inotify_instances", "0", "fs.inotify.max_user_instances"),  # inotify_init fails
])  # fmt: skip
def test_a_server_that_cannot_watch_its_code_never_serves(
    tmp_path: Path, knob: str, value: str, why: str
) -> None:
    """Each command starts cold (and runs), no server listens, and the server's log
    says why."""
    if not _user_namespaces():
        pytest.skip("no user namespaces here (unshare --user)")
    # (A server that did listen ends soon after the test, wherever it was left.)
    env = warm_env(tmp_path, CODEMODE_WARM_IDLE="20")
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--", sys.executable, "-c", _SPENT, knob,
         value, INTERPRETER],
        env=env, capture_output=True, text=True, timeout=400, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done
    got = json.loads(done.stdout.splitlines()[-1])
    if "skip" in got:
        pytest.skip(got["skip"])
    assert got["first"].startswith("decision:") and got["second"].startswith("decision:"), got
    assert not got["listened"] and got["served"] == 0, got
    assert "warm: cannot watch" in got["log"] and why in got["log"], got["log"]
    assert "Traceback" not in got["log"], got["log"]
