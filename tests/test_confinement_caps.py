"""A confined command holds no capabilities, whoever runs codemode (issue: root kept them).

Each attack runs in the real sandbox, once per backend and once per user (this one —
root on CI — and nobody). The probes are harmless even if they succeeded: the clock is
set to the time it already has, the hostname to the name it already has; a remount
could only write the decoy file outside the workspace, which the test checks.
"""

from __future__ import annotations

import socket
import textwrap
import time
from pathlib import Path

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless

__all__ = ["shared_dir"]


def _dirs(shared_dir: Path, user: str) -> tuple[Path, Path]:
    ws, outside = shared_dir / "ws", shared_dir / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n")
    outside.chmod(0o777)  # writable by anyone: only the sandbox stands in the way
    (outside / "victim.txt").chmod(0o666)
    give(ws, user)
    return ws, outside


async def test_no_capabilities_in_any_set(shared_dir: Path, user: str, backend: str) -> None:
    skip_unless(user, backend)
    ws, _ = _dirs(shared_dir, user)
    r = run_shell(user, ws, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status",
                  backend=backend)
    lines = dict(line.split(":\t") for line in r["output"].splitlines())
    assert lines == {
        "CapInh": "0000000000000000", "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
        "CapAmb": "0000000000000000", "NoNewPrivs": "1",
    }, r["output"]


PROBES = textwrap.dedent(
    """
    import ctypes, errno, os, socket, time
    libc = ctypes.CDLL(None, use_errno=True)
    def report(name, rc):
        print(name, "allowed" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
    name = socket.gethostname().encode()
    report("sethostname", libc.sethostname(name, len(name)))
    try:
        time.clock_settime(time.CLOCK_REALTIME, time.time()); print("settime allowed")
    except PermissionError:
        print("settime EPERM")
    # with CAP_SYS_MODULE this fails EBADF instead (no such file descriptor)
    report("finit_module", libc.syscall(313, -1, b"", 0))
    report("iopl", libc.iopl(3))
    report("ioperm", libc.ioperm(0x80, 1, 1))
    report("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
    open("mine", "w").close()
    # giving a file away needs CAP_CHOWN (EINVAL: uid 1 does not exist in the namespace)
    report("chown", libc.chown(b"mine", 1, 1))
    """
)


async def test_privileged_calls_are_refused(shared_dir: Path, user: str, backend: str) -> None:
    skip_unless(user, backend)
    ws, _ = _dirs(shared_dir, user)
    before = socket.gethostname()
    r = run_shell(user, ws, f"python3 -c '{PROBES}'", backend=backend)
    got = dict(line.split(" ", 1) for line in r["output"].splitlines())
    assert got.pop("chown", None) in ("EPERM", "EINVAL"), r["output"]
    assert got == {
        "sethostname": "EPERM", "settime": "EPERM", "finit_module": "EPERM", "iopl": "EPERM",
        "ioperm": "EPERM", "mount": "EPERM",
    }, r["output"]
    assert socket.gethostname() == before


@pytest.mark.parametrize(
    "attack",
    [
        "mount -o remount,bind,rw / && touch {o}/x",
        "mount -o remount,rw / ; echo pwned > {o}/victim.txt",
        "unshare -Urm sh -c 'mount -o remount,bind,rw / && echo pwned > {o}/victim.txt'",
        "hostname codemode-pwned",
        "date -s '2001-01-01 00:00:00'",
    ],
)
async def test_remount_hostname_and_clock_attacks_fail(
    shared_dir: Path, user: str, backend: str, attack: str
) -> None:
    skip_unless(user, backend)
    ws, outside = _dirs(shared_dir, user)
    host = socket.gethostname()
    wall, mono = time.time(), time.monotonic()
    r = run_shell(user, ws, attack.format(o=outside), backend=backend, sandbox_mode="read-only")
    assert r["exit_code"] != 0, r["output"]
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "original\n"
    assert socket.gethostname() == host
    # the clock was not set back to 2001: wall time moved as monotonic time did
    assert abs((time.time() - wall) - (time.monotonic() - mono)) < 3600
