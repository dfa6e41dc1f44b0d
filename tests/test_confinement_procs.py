"""Sockets, signals, /proc and process trees in the real sandbox (both backends, as this
user and as nobody): host Unix sockets by path and abstract are out of reach unless
allowed, host processes can be neither signalled nor read, and nothing a command
started outlives it."""

from __future__ import annotations

import os
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless

from codemode.sandbox.confinement.confine import probe

__all__ = ["shared_dir"]


@pytest.fixture
def ws(shared_dir: Path, user: str) -> Path:
    w = shared_dir / "ws"
    w.mkdir()
    give(w, user)
    return w


class Listener:
    def __init__(self, address: str | bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        if isinstance(address, str):
            os.chmod(address, 0o777)  # anyone may connect: only the sandbox stands in the way
        self.sock.listen(4)
        self.sock.settimeout(0.3)

    def accepted(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except TimeoutError:
            return False
        conn.close()
        return True


@pytest.fixture
def listeners(shared_dir: Path) -> Iterator[tuple[Listener, Listener, Listener, bytes]]:
    name = f"codemode-test-{os.getpid()}-{time.monotonic_ns()}".encode()
    a = Listener(str(shared_dir / "allowed.sock"))
    b = Listener(str(shared_dir / "other.sock"))
    c = Listener(b"\0" + name)
    yield a, b, c, name
    for x in (a, b, c):
        x.sock.close()


CONNECT = textwrap.dedent(
    """
    import socket, sys
    for label, addr in (("allowed", sys.argv[1]), ("other", sys.argv[2]),
                        ("abstract", b"\\0" + sys.argv[3].encode())):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(addr)
            print(label, "connected")
        except OSError as exc:
            print(label, type(exc).__name__)
    """
)


def _connect(user: str, ws: Path, shared_dir: Path, name: bytes, **settings: object) -> dict:
    script = ws / "connect.py"
    script.write_text(CONNECT)
    script.chmod(0o644)
    cmd = f"python3 connect.py {shared_dir}/allowed.sock {shared_dir}/other.sock {name.decode()}"
    return run_shell(user, ws, cmd, **settings)


def _seccomp() -> None:
    if probe().seccomp is not None:
        pytest.skip(f"seccomp cannot run on this machine: {probe().seccomp}")


async def test_unix_sockets_are_denied_by_default(
    ws: Path, shared_dir: Path, user: str, backend: str, listeners: tuple
) -> None:
    skip_unless(user, backend)
    _seccomp()
    a, b, c, name = listeners
    for mode in ("read-only", "workspace-write"):
        r = _connect(user, ws, shared_dir, name, backend=backend, sandbox_mode=mode)
        assert "connected" not in r["output"], (mode, r["output"])
    assert not (a.accepted() or b.accepted() or c.accepted())
    # the same script unconfined does connect: the test can tell the difference
    r = _connect(user, ws, shared_dir, name, sandbox_mode="danger-full-access")
    assert r["output"].count("connected") == 3, r["output"]


async def test_allow_unix_sockets_lets_only_the_listed_ones_through(
    ws: Path, shared_dir: Path, user: str, backend: str, listeners: tuple
) -> None:
    skip_unless(user, backend)
    _seccomp()
    a, b, _, name = listeners
    r = _connect(user, ws, shared_dir, name, backend=backend,
                 allow_unix_sockets=[str(shared_dir / "allowed.sock")])
    if backend == "landlock":  # Landlock cannot tell socket files apart: refused
        assert r["output"].startswith("refused:") and "connected" not in r["output"], r
        assert not (a.accepted() or b.accepted())
        return
    lines = dict(line.split() for line in r["output"].splitlines())
    assert lines["allowed"] == "connected", r["output"]
    assert a.accepted()
    assert lines["abstract"] != "connected", r["output"]
    assert lines["other"] != "connected", r["output"]
    assert not b.accepted()


X32 = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(0x40000000 | 41, 1, 1, 0)  # socket(AF_UNIX) through the x32 ABI
    print("x32", "allowed" if r >= 0 else os.strerror(ctypes.get_errno()))
    """
)


async def test_x32_abi_does_not_bypass_the_filter(ws: Path, user: str, backend: str) -> None:
    skip_unless(user, backend)
    _seccomp()
    r = run_shell(user, ws, f"python3 -c '{X32}'", backend=backend)
    assert r["output"].strip() == "x32 Function not implemented", r["output"]


async def test_host_processes_cannot_be_signalled_or_read(
    ws: Path, user: str, backend: str
) -> None:
    skip_unless(user, backend)
    env = {"DECOY_API_KEY": "sk-decoy", "PATH": "/bin:/usr/bin"}
    decoy = subprocess.Popen(["sleep", "60"], env=env)
    try:
        cmd = (f"kill -TERM {decoy.pid}; kill -KILL {os.getpid()}; "
               f"cat /proc/{decoy.pid}/environ /proc/{os.getpid()}/environ; "
               f"ls /proc/{decoy.pid} >/dev/null 2>&1 && echo sees-host-pids; echo done")
        r = run_shell(user, ws, cmd, backend=backend, extra_env={"HOST_API_KEY": "sk-host"})
        assert "sk-decoy" not in r["output"] and "sk-host" not in r["output"], r["output"]
        assert r["output"].rstrip().endswith("done")
        time.sleep(0.2)
        assert decoy.poll() is None, "the confined command killed a host process"
    finally:
        decoy.kill()
        decoy.wait()


@pytest.mark.parametrize(
    "start",
    [
        "setsid -f sleep {t}",
        "( (sleep {t} &) & )",
        "nohup setsid sleep {t} >/dev/null 2>&1 &",
    ],
)
async def test_leftover_processes_end_with_the_command(
    ws: Path, user: str, backend: str, start: str
) -> None:
    skip_unless(user, backend)
    t = f"{40 + os.getpid() % 1000}.{time.monotonic_ns() % 10_000:04d}"
    r = run_shell(user, ws, start.format(t=t) + "; echo started", backend=backend)
    assert "started" in r["output"]
    for _ in range(40):
        alive = subprocess.run(["pgrep", "-f", f"sleep {t}"], capture_output=True).stdout
        if not alive:
            break
        time.sleep(0.05)
    assert not alive, f"sleep {t} outlived the command"


async def test_allow_list_copes_with_sockets_it_cannot_reach(
    ws: Path, shared_dir: Path, listeners: tuple
) -> None:
    # a socket in another user's private folder: nothing to cover (bubblewrap could not)
    skip_unless("self", "bubblewrap")
    _seccomp()
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder of another user")
    private = shared_dir / "private"
    private.mkdir()
    hidden = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hidden.bind(str(private / "x.sock"))
    hidden.listen(1)
    os.chown(private, 1000, 1000)
    private.chmod(0o700)
    try:
        name = listeners[3]
        r = _connect("self", ws, shared_dir, name, backend="bubblewrap",
                     allow_unix_sockets=[str(shared_dir / "allowed.sock")])
        assert "allowed connected" in r["output"], r["output"]
    finally:
        hidden.close()


SET_ID = textwrap.dedent(
    """
    import ctypes, os, shutil, stat
    libc = ctypes.CDLL(None, use_errno=True)
    shutil.copy("/bin/sh", "sh-copy")
    tries = {
        "chmod": lambda: os.chmod("sh-copy", 0o4755),
        "chmod-gid": lambda: os.chmod("sh-copy", 0o2755),
        "fchmod": lambda: os.fchmod(os.open("sh-copy", os.O_RDONLY), 0o6755),
        "open-creat": lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755)),
        "mknod": lambda: os.mknod("node", stat.S_IFREG | 0o4755),
        "fchmodat2": lambda: libc.syscall(452, -100, b"sh-copy", 0o4755, 0) == 0 or 1 / 0,
    }
    for name, attempt in tries.items():
        try:
            attempt()
        except Exception:
            pass
    for name in ("sh-copy", "made", "node"):
        if os.path.exists(name) and os.stat(name).st_mode & 0o6000:
            print("set-id:", name, oct(os.stat(name).st_mode))
    os.chmod("sh-copy", 0o755)  # plain modes still change
    print("done", oct(os.stat("sh-copy").st_mode & 0o7777))
    """
)


async def test_no_command_leaves_a_set_id_file_in_the_workspace(
    ws: Path, user: str, backend: str
) -> None:
    """A command running as root (capabilities dropped, files still root's) must not leave
    a set-user-ID shell in the workspace, which outlives the sandbox: chmod, fchmod,
    fchmodat2, a creating open and mknod with set-id bits all fail (EPERM)."""
    skip_unless(user, backend)
    _seccomp()
    (ws / "probe.py").write_text(SET_ID)
    r = run_shell(user, ws, "python3 probe.py", backend=backend)
    assert "set-id:" not in r["output"], r["output"]
    assert r["output"].strip().endswith("done 0o755"), r["output"]
    for name in ("sh-copy", "made", "node"):
        if (ws / name).exists():
            assert not (ws / name).stat().st_mode & 0o6000, name
