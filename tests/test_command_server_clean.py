"""Each command of a session starts clean, with the command server as without it: what
one command does to the scheduling it would pass on (nice value, policy, CPU affinity,
I/O priority, OOM adjustment) or leaves in the sandbox's own tmpfs (``/dev/shm``, with
folders of modes 000 and 500, the mount's own mode) or IPC namespace is not what the
next command meets. Every case runs real commands through a real ``SandboxSession`` in
bubblewrap, as root and as uid 65534 where the machine allows, server on and off."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.server.tidy import remove_all
from tests.confinement_support import (
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    nobody_unavailable,
    shared_dir,
)

__all__ = ["shared_dir"]

pytestmark = pytest.mark.skipif(
    probe().bubblewrap is not None, reason=f"bubblewrap: {probe().bubblewrap}"
)

DRIVER = """
import asyncio, json, sys
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
ws, commands, server = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "on"
async def main():
    s = SandboxSession(ws, SandboxSettings(approval_policy="never", backend="bubblewrap",
                                           command_server=server))
    ctx, reg, out = ToolContext(workspace=ws, sandbox=s), builtin_registry(), []
    try:
        for c in commands:
            out.append((await reg.invoke("shell", {"command": c}, ctx))["output"])
        out.append(s.runner._servers is not None and s.runner._servers._current is not None)
    finally:
        s.close()
    print(json.dumps(out))
asyncio.run(main())
"""

# What a command meets: its own scheduling and OOM adjustment, and /dev/shm.
PROBE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ioprio = libc.syscall({"x86_64": 252, "aarch64": 31}.get(os.uname().machine, -1), 1, 0)
print("nice", os.getpriority(os.PRIO_PROCESS, 0), "policy", os.sched_getscheduler(0),
      "cpus", len(os.sched_getaffinity(0)), "ioprio", ioprio,
      "oom", open("/proc/self/oom_score_adj").read().strip())
print("shm", oct(os.stat("/dev/shm").st_mode & 0o7777), sorted(os.listdir("/dev/shm")))
"""

# Everything one command could try to pass on to the next.
ATTACK = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, act):
    try:
        act()
        print(name, "allowed")
    except OSError as exc:
        print(name, "refused", exc.errno)
def ioprio_set(which, who):
    nr = {"x86_64": 251, "aarch64": 30}[os.uname().machine]
    if libc.syscall(nr, which, who, (3 << 13)) != 0:  # the idle class
        raise OSError(ctypes.get_errno(), "ioprio_set")
def oom():
    with open("/proc/1/oom_score_adj", "w") as f:
        f.write("987")
attempt("nice pid 1", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("nice user", lambda: os.setpriority(os.PRIO_USER, 0, 19))
attempt("nice group", lambda: os.setpriority(os.PRIO_PGRP, 1, 19))
attempt("policy pid 1", lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))
attempt("param pid 1", lambda: os.sched_setparam(1, os.sched_param(0)))
attempt("affinity pid 1", lambda: os.sched_setaffinity(1, {min(os.sched_getaffinity(0))}))
attempt("ioprio pid 1", lambda: ioprio_set(1, 1))
attempt("ioprio user", lambda: ioprio_set(3, 0))
# Its own nice value: raising it (5 more, up to 19: less CPU) is anyone's right; lowering it
# below what it inherited needs CAP_SYS_NICE, which no command has (under `nice` too).
own = os.getpriority(os.PRIO_PROCESS, 0)
attempt("own nice below inherited", lambda: os.setpriority(os.PRIO_PROCESS, 0, own - 1))
attempt("own nice", lambda: os.setpriority(os.PRIO_PROCESS, 0, min(own + 5, 19)))
attempt("own affinity", lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
attempt("own ioprio", lambda: ioprio_set(1, 0))
rt = ctypes.CDLL("librt.so.1", use_errno=True)
def mq():
    if rt.mq_open(b"/left", os.O_CREAT | os.O_RDWR, 0o600, None) == -1:
        raise OSError(ctypes.get_errno(), "mq_open")
attempt("mq_open", mq)
try:
    oom()
    print("oom pid 1 written")
except OSError as exc:
    print("oom pid 1 refused", exc.errno)
for name, mode in (("locked", 0o000), ("readonly", 0o500)):
    d = f"/dev/shm/{name}"
    os.makedirs(f"{d}/inner")
    open(f"{d}/inner/secret", "w").write("left for the next command")
    open(f"{d}/secret", "w").write("left for the next command")
    os.chmod(f"{d}/inner", mode)
    os.chmod(d, mode)
open("/dev/shm/plain", "w").write("x")
os.symlink("/etc/passwd", "/dev/shm/link")
try:
    os.chmod("/dev/shm", 0)
    print("shm mode changed")
except OSError as exc:
    print("shm mode refused", exc.errno)
"""


def run_session(ws: Path, commands: list[str], server: bool, user: str) -> list[object]:
    env = {**os.environ, "CODEMODE_HOME": str(ws.parent / "home")}
    argv = [sys.executable]
    if user == "nobody":
        env.update(PYTHONPATH=f"{REPO}:{_site_packages()}", HOME=str(ws.parent))
        argv = [*_as_nobody(), SYSTEM_PYTHON]
    argv += ["-c", DRIVER, str(ws), json.dumps(commands), "on" if server else "off"]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    out: list[object] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_the_next_command_starts_clean_with_the_server_on_and_off(
    shared_dir: Path, user: str
) -> None:
    if user == "nobody" and (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    python = sys.executable if user == "self" else SYSTEM_PYTHON
    probe_py, attack_py = shared_dir / "probe.py", shared_dir / "attack.py"
    probe_py.write_text(PROBE)
    attack_py.write_text(ATTACK)
    probe_py.chmod(0o644)
    attack_py.chmod(0o644)
    results = {}
    for server in (True, False):
        ws = shared_dir / f"ws-{server}"
        ws.mkdir()
        give(ws, user)
        first, attack, after, served = run_session(
            ws,
            [f"{python} {probe_py}", f"{python} {attack_py}", f"{python} {probe_py}"],
            server,
            user,
        )
        assert served is server
        assert "shm 0o1777 []" in str(first), first
        # The next command meets exactly what the first one did.
        assert after == first, (server, attack, after)
        results[server] = (first, attack, after)
    # The same, command for command, with the server and without it.
    assert results[True] == results[False], results
    attack = str(results[True][1])
    # /proc is read-only: not even root (whose the server's /proc files are) writes
    # the server's OOM adjustment (test_command_server_proc has the other files).
    assert "oom pid 1 refused 30" in attack, attack
    for name in (
        "nice pid 1", "nice user", "nice group", "policy pid 1", "param pid 1",
        "affinity pid 1", "ioprio pid 1", "ioprio user", "mq_open",
    ):  # fmt: skip
        assert f"{name} refused 1" in attack, (name, attack)
    for name in ("own nice", "own affinity", "own ioprio"):
        assert f"{name} allowed" in attack, (name, attack)
    # A command may lower its own priority, never raise it above what the session was
    # started with (the nice value it inherited, whatever that is: tests run under nice).
    assert "own nice below inherited refused 13" in attack, attack


def test_remove_all_empties_folders_of_any_mode(tmp_path: Path) -> None:
    """What the server's tidy does to /dev/shm, on a folder of its own: modes 000 and
    500 at every depth, symlinks (not followed), files."""
    top = tmp_path / "shm"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    outside_mode = os.stat(outside).st_mode
    for name, mode in (("locked", 0o000), ("readonly", 0o500)):
        d = top / name / "inner"
        d.mkdir(parents=True)
        (d / "f").write_text("x")
        (top / name / "g").write_text("y")
        d.chmod(mode)
        (top / name).chmod(mode)
    (top / "link").symlink_to(outside)
    for entry in os.scandir(top):
        remove_all(entry.path)
    assert os.listdir(top) == []
    assert (outside / "keep").read_text() == "kept"
    assert os.stat(outside).st_mode == outside_mode  # the link's target: not chmodded


def test_the_baseline_puts_back_oom_and_affinity_and_says_what_it_cannot(
    tmp_path: Path,
) -> None:
    """In a child process (it changes its own scheduling): the OOM adjustment and the
    affinity are put back; a nice value it may not lower again is reported, which makes
    the server refuse further commands and the host replace it."""
    code = r"""
import ctypes, os
from codemode.sandbox.server.baseline import Baseline
fd = os.open("/proc/self/oom_score_adj", os.O_RDWR)
b = Baseline(ctypes.CDLL(None, use_errno=True), fd)
open("/proc/self/oom_score_adj", "w").write("987")
cpus = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cpus)})
print("restore", b.restore())
oom = open("/proc/self/oom_score_adj").read().strip()
print("oom", oom, "cpus", os.sched_getaffinity(0) == cpus)
os.setpriority(os.PRIO_PROCESS, 0, 19)
problems = b.restore()
print("after nice", os.getpriority(os.PRIO_PROCESS, 0) == b.nice, problems)
"""
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "restore []"
    oom_before = Path("/proc/self/oom_score_adj").read_text().strip()
    assert lines[1] == f"oom {oom_before} cpus True"
    if os.geteuid() == 0:  # root may lower it again: put back
        assert lines[2] == "after nice True []"
    else:  # it may not: said, so that the server is replaced
        assert lines[2].startswith("after nice False ['nice:"), lines[2]


# The server with a fault put in: ``restore`` reports a problem (once) when the
# workspace holds the file FLAG, as it would for a change it could not undo.
FLAG = "force-dirty"


def _faulty_program(flag: Path) -> bytes:
    from codemode.sandbox.server import server_program

    texts = [list(t) for t in server_program.texts()]
    (baseline,) = [t for t in texts if t[0] == "baseline"]
    source = baseline[1]
    hook = (
        "    def restore(self) -> list[str]:\n"
        "        problems = []\n"
    )
    assert hook in source
    fault = hook + (
        f"        if os.path.exists({str(flag)!r}):\n"
        f"            os.unlink({str(flag)!r})\n"
        "            problems.append('forced by the test')\n"
    )
    baseline[1] = source.replace(hook, fault)
    pkg = server_program.PACKAGE
    return marshal.dumps([(f"{pkg}.{n}", compile(t, f"{n}.py", "exec")) for n, t in texts])


async def test_a_server_that_cannot_be_made_clean_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from codemode.sandbox.server import server_program
    from tests.test_command_server import Shell

    faulty = _faulty_program(tmp_path / FLAG)
    monkeypatch.setattr(server_program, "program", lambda: faulty)
    s = Shell(tmp_path)
    try:
        # After a command: found when it ends; the next command gets a new server.
        assert (await s("echo one"))["output"] == "one\n"
        first = s.server
        assert (await s(f"touch {tmp_path / FLAG}; echo two"))["output"] == "two\n"
        assert first is not None and first.dirty and not first.alive
        assert (await s("echo three"))["output"] == "three\n"
        second = s.server
        assert second is not None and second is not first and second.alive
        # While another runs: the command is not started there, but in a new server.
        slow = asyncio.ensure_future(s(f"touch {tmp_path / FLAG}; sleep 1; echo slow"))
        await asyncio.sleep(0.5)
        fast = await s("echo fast")
        assert fast["output"] == "fast\n" and fast["exit_code"] == 0, fast
        assert (await slow)["output"] == "slow\n"
        third = s.server
        assert second.dirty and third is not None and third is not second
        assert (await s("echo four"))["output"] == "four\n"
    finally:
        s.close()


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_with_landlock_a_command_cannot_reschedule_a_host_process(
    shared_dir: Path, user: str
) -> None:
    """Without a PID namespace (Landlock) the same filter keeps a command from slowing
    a process of its user outside the sandbox (the agent itself): here a ``sleep`` the
    test started as that user."""
    from tests.confinement_support import NOBODY, run_shell, skip_unless

    skip_unless(user, "landlock")
    victim = subprocess.Popen(
        ["sleep", "120"],
        user=NOBODY if user == "nobody" else None,
        group=NOBODY if user == "nobody" else None,
    )
    try:
        ws = shared_dir / "ws"
        ws.mkdir()
        give(ws, user)
        python = sys.executable if user == "self" else SYSTEM_PYTHON
        attack = shared_dir / "attack.py"
        # Only what aims at the victim: a regression must not renice the machine.
        aimed = "\n".join(
            line
            for line in ATTACK.split("rt = ctypes.CDLL")[0].splitlines()
            if not any(k in line for k in ("nice user", "nice group", "ioprio user", "own "))
        )
        attack.write_text(
            aimed
            .replace("os.PRIO_PROCESS, 1,", "os.PRIO_PROCESS, PID,")
            .replace("(1, os.SCHED_IDLE", "(PID, os.SCHED_IDLE")
            .replace("sched_setparam(1,", "sched_setparam(PID,")
            .replace("sched_setaffinity(1,", "sched_setaffinity(PID,")
            .replace("ioprio_set(1, 1)", "ioprio_set(1, PID)")
            .replace("import ctypes, os", f"import ctypes, os\nPID = {victim.pid}")
        )
        attack.chmod(0o644)
        r = run_shell(user, ws, f"{python} {attack}", backend="landlock")
        out = r["output"]
        for name in ("nice pid 1", "policy pid 1", "param pid 1", "affinity pid 1",
                     "ioprio pid 1"):  # fmt: skip
            assert f"{name} refused 1" in out, (name, out)
        assert os.getpriority(os.PRIO_PROCESS, victim.pid) == os.getpriority(
            os.PRIO_PROCESS, 0
        )
        assert os.sched_getaffinity(victim.pid) == os.sched_getaffinity(0)
        assert os.sched_getscheduler(victim.pid) == os.sched_getscheduler(0)
    finally:
        victim.kill()
        victim.wait()
