"""No command reaches what the command server hands the next one through ``/proc``.

The attack (issue 38): a command writes ``/proc/1/coredump_filter`` of the command
server (PID 1 of the sandbox; as root the file is the command's own user's, so it could),
and every later command inherits the value. The same for every other attribute file
under ``/proc/1`` a command could write, and for the scheduling and limits reachable by
system calls. Each case runs real commands through a real ``SandboxSession`` in
bubblewrap, as root and as uid 65534 where the machine allows, server on and off: the
command after the attack must see exactly what the one before it saw.
"""

from __future__ import annotations

import os
import sys

import pytest

from codemode.sandbox.confinement.confine import probe
from tests.confinement_support import SYSTEM_PYTHON, give, nobody_unavailable, shared_dir
from tests.test_command_server_clean import run_session

__all__ = ["shared_dir"]

pytestmark = pytest.mark.skipif(
    probe().bubblewrap is not None, reason=f"bubblewrap: {probe().bubblewrap}"
)

# What a command inherits that a /proc file or a system call on another process sets.
PROBE = r"""
import os, resource
def own(name):
    try:
        return open(f"/proc/self/{name}").read().split("\n")[0]
    except OSError as exc:
        return f"unreadable {exc.errno}"
print("coredump_filter", own("coredump_filter"))
print("oom_score_adj", own("oom_score_adj"))
print("timerslack_ns", own("timerslack_ns"))
print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE))
print("core", resource.getrlimit(resource.RLIMIT_CORE))
print("nice", os.getpriority(os.PRIO_PROCESS, 0), "policy", os.sched_getscheduler(0))
for name in ("coredump_filter", "oom_score_adj", "comm", "autogroup"):
    try:
        value = open(f"/proc/1/{name}").read().strip()
        # (an autogroup's number is new with each sandbox: its nice value is what counts)
        print("pid1", name, value.split()[-1] if name == "autogroup" else value)
    except OSError as exc:
        print("pid1", name, "unreadable", exc.errno)
"""

# Every write a command could try on PID 1 (and its one thread).
ATTACK = r"""
import ctypes, os, resource
FILES = {
    "coredump_filter": "0x7f", "oom_score_adj": "999", "oom_adj": "15", "comm": "owned",
    "loginuid": "4242", "timerslack_ns": "123456", "autogroup": "19", "sched": "0",
    "clear_refs": "1", "make-it-fail": "1",
}
written = []
for base in ("/proc/1", "/proc/1/task/1"):
    for name, value in FILES.items():
        try:
            with open(f"{base}/{name}", "w") as f:
                f.write(value)
            written.append(f"{base}/{name}")
        except OSError:
            pass
def attempt(name, act):
    try:
        act()
        written.append(name)
    except OSError:
        pass
attempt("prlimit nofile", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 64)))
attempt("prlimit core", lambda: resource.prlimit(1, resource.RLIMIT_CORE, (0, 0)))
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("policy", lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))
print("written", sorted(written))
"""


@pytest.mark.parametrize("server", [True, False], ids=["server", "no-server"])
@pytest.mark.parametrize("user", ["self", "nobody"])
def test_no_command_changes_what_the_next_one_inherits_through_proc(
    shared_dir: os.PathLike[str], user: str, server: bool
) -> None:
    if user == "nobody" and (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    from pathlib import Path

    shared = Path(shared_dir)
    python = sys.executable if user == "self" else SYSTEM_PYTHON
    probe_py, attack_py = shared / "probe.py", shared / "attack.py"
    probe_py.write_text(PROBE)
    attack_py.write_text(ATTACK)
    probe_py.chmod(0o644)
    attack_py.chmod(0o644)
    ws = shared / "ws"
    ws.mkdir()
    give(ws, user)
    first, attack, after, _served = run_session(
        ws, [f"{python} {probe_py}", f"{python} {attack_py}", f"{python} {probe_py}"],
        server, user,
    )  # fmt: skip
    assert "coredump_filter" in str(first), first
    # Nothing under /proc/1 (nor PID 1's limits or scheduling) took the write ...
    assert "written []" in str(attack), attack
    # ... so the next command meets exactly what the first one did.
    assert after == first, (attack, first, after)
