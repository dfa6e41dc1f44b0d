"""The command server: one bubblewrap sandbox per session, each command started in it.

Every test runs real commands in a real sandbox through ``SandboxSession`` and the shell
tool, and checks what a sandbox of its own per command would have guaranteed: nothing a
command started outlives it, a command cannot end or read the server, a timeout or a
dead server leaves the session usable, and a protected entry replaced on the host gets
a sandbox built from what is there now.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.server.server_handle import CommandServer
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
from tests.confinement_support import nobody_unavailable

pytestmark = pytest.mark.skipif(
    probe().bubblewrap is not None, reason=f"bubblewrap: {probe().bubblewrap}"
)


class Shell:
    """One sandbox session in ``ws``; ``await shell(cmd)`` runs one shell tool call."""

    def __init__(self, ws: Path, **settings: Any) -> None:
        self.session = SandboxSession(
            ws, SandboxSettings(approval_policy="never", backend="bubblewrap", **settings)
        )
        self.ctx = ToolContext(workspace=ws, sandbox=self.session)
        self.registry = builtin_registry()

    async def __call__(self, command: str, timeout_ms: int = 20_000) -> dict[str, Any]:
        args = {"command": command, "timeout_ms": timeout_ms}
        result: dict[str, Any] = await self.registry.invoke("shell", args, self.ctx)
        return result

    @property
    def server(self) -> CommandServer | None:
        servers = self.session.runner._servers
        return servers._current if servers is not None else None

    def close(self) -> None:
        self.session.close()


@pytest.fixture
async def shell(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = Shell(tmp_path)
    yield s
    s.close()


def _unique_seconds() -> str:
    """A sleep length no other process on the machine has on its command line, so a
    test can look for its own leftovers host-wide."""
    return f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 10**6}"


def _host_has(marker: str) -> bool:
    """Whether any process on the host still has ``marker`` in its command line."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        return True
            except OSError:
                continue
    return False


async def test_commands_share_one_sandbox_that_is_the_one_a_command_would_get(
    shell: Shell, tmp_path: Path
) -> None:
    first = await shell("cat /proc/1/cmdline | tr '\\0' ' '; echo; grep ^Cap /proc/self/status")
    server = shell.server
    assert server is not None and server.alive
    assert "command_server.py" in first["output"] or "-I -S -c" in first["output"]
    assert "CapEff:\t0000000000000000" in first["output"]
    assert "CapBnd:\t0000000000000000" in first["output"]
    second = await shell(f"echo made > {tmp_path}/made; echo x > /etc/codemode-escape; echo $?")
    assert shell.server is server  # the same sandbox served it
    assert (tmp_path / "made").read_text() == "made\n"
    assert not Path("/etc/codemode-escape").exists()
    assert second["output"].strip().endswith("1"), second["output"]
    # and the network is as closed as in a sandbox of its own
    net = await shell(
        f"{sys.executable} -c \"import socket; socket.socket(socket.AF_INET)\" 2>&1; echo rc=$?"
    )
    assert "rc=1" in net["output"] and "Operation not permitted" in net["output"], net


async def test_without_the_server_each_command_gets_a_sandbox_of_its_own(tmp_path: Path) -> None:
    s = Shell(tmp_path, command_server=False)
    try:
        r = await s("cat /proc/1/cmdline | tr '\\0' ' '")
        assert s.session.runner._servers is None
        assert "command_server" not in r["output"] and "-I -S -c" not in r["output"]
    finally:
        s.close()


@pytest.mark.parametrize(
    "start",
    [
        "sleep {t} &",
        "setsid sleep {t} &",
        "(setsid sleep {t} &)",
        "nohup setsid sleep {t} > /dev/null 2>&1 &",
        "( ( sleep {t} & ) & )",
    ],
)
async def test_nothing_a_command_started_outlives_it(shell: Shell, start: str) -> None:
    t = _unique_seconds()
    r = await shell(f"{start.format(t=t)} echo started")
    assert "started" in r["output"]
    assert not _host_has(f"sleep\0{t}"), "a left-behind process is still running on the host"
    after = await shell("ps -eo args")
    assert f"sleep {t}" not in after["output"], after["output"]


async def test_a_running_commands_processes_outlive_another_command_ending(
    shell: Shell,
) -> None:
    t = _unique_seconds()
    await shell("true")  # the server is up before the two start
    long = asyncio.create_task(
        shell(f"setsid sleep {t} & (sleep {t}1 &); sleep 1.5; ps -eo args | grep -c '^sleep {t}'")
    )
    await asyncio.sleep(0.3)
    quick = await shell("echo quick")  # ends while the long one runs
    assert quick["output"] == "quick\n"
    r = await long
    assert r["output"].strip() == "2", r["output"]  # both of its sleeps were still there
    assert not _host_has(f"sleep\0{t}")


STEAL = """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(1)
for fd in range(8):  # the server's socket is one of these
    print("getfd", libc.syscall(438, pidfd, fd, 0), ctypes.get_errno())
try:
    resource.prlimit(1, resource.RLIMIT_NOFILE, (0, 0))
    print("prlimit allowed")
except OSError as exc:
    print("prlimit refused", exc.errno)
print("own", resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)) is not None)
"""


async def test_commands_cannot_take_the_servers_descriptors_or_limit_it(
    shell: Shell, tmp_path: Path
) -> None:
    await shell("true")
    server = shell.server
    (tmp_path / "steal.py").write_text(STEAL)
    r = await shell(f"{sys.executable} steal.py")
    lines = r["output"].splitlines()
    assert [line.split()[1] for line in lines[:8]] == ["-1"] * 8, r["output"]
    assert "prlimit refused 1" in lines and "own True" in lines, r["output"]
    assert (await shell("echo fine"))["output"] == "fine\n" and shell.server is server


async def test_a_command_inherits_only_its_own_stdio_and_default_signals(shell: Shell) -> None:
    """The server starts commands with nothing of its own: no socket to the host, no
    descriptor of another command (one is still running beside it), and the signals
    Python ignores (SIGPIPE) back at their defaults, as ``subprocess`` would have it."""
    await shell("true")
    beside = asyncio.create_task(shell("sleep 1; echo beside"))
    await asyncio.sleep(0.3)
    # Listed once the background command is `sleep`: until its exec, bash's child holds
    # a descriptor of bash's own for a moment (its stdin made /dev/null: open, dup2, close).
    r = await shell(
        "sleep 0.5 & p=$!; for i in $(seq 2000); do "
        '[ "$(cat /proc/$p/comm 2>/dev/null)" = sleep ] && break; done; ls /proc/$p/fd; wait'
    )
    assert r["output"].split() == ["0", "1", "2"], r["output"]
    r = await shell("yes | head -1; echo ${PIPESTATUS[@]}; cd /; cat; echo rc=$?")
    assert r["output"] == "y\n141 0\nrc=0\n", r["output"]  # killed by SIGPIPE; stdin empty
    assert (await beside)["output"] == "beside\n"
    r = await shell("pwd")
    assert r["output"].strip() == str(shell.ctx.workspace)


async def test_commands_cannot_end_or_read_the_server(shell: Shell) -> None:
    await shell("true")
    server = shell.server
    r = await shell(
        "kill -9 1; kill -TERM 1; kill -INT 1; kill -9 -1; "
        "cat /proc/1/environ; head -c1 /proc/1/mem; readlink /proc/1/fd/0; "
        "for f in /proc/1/fd/*; do head -c1 $f; done; echo end"
    )
    assert "end" in r["output"]
    assert "PATH=" not in r["output"] and "socket:" not in r["output"]
    assert r["output"].count("Permission denied") >= 4, r["output"]
    again = await shell("echo still here")
    assert again["output"] == "still here\n"
    assert shell.server is server and server is not None and server.alive


async def test_a_timeout_ends_the_whole_command_and_the_next_runs(shell: Shell) -> None:
    t = _unique_seconds()
    await shell("true")
    started = time.monotonic()
    r = await shell(f"sleep {t} & setsid sleep {t} & sleep {t}", timeout_ms=500)
    elapsed = time.monotonic() - started
    assert r["timed_out"] and r["exit_code"] == 124
    assert elapsed < 5, elapsed  # the timeout plus the drain grace, with room for a busy machine
    assert not _host_has(f"sleep\0{t}")
    assert (await shell("echo next"))["output"] == "next\n"


async def test_exit_codes_and_signals_are_the_commands(shell: Shell) -> None:
    assert (await shell("exit 3"))["exit_code"] == 3
    assert (await shell("kill -TERM $$"))["exit_code"] == 128 + signal.SIGTERM
    missing = await shell("no-such-program-here")
    assert missing["exit_code"] == 127 and "not found" in missing["output"]
    env = await shell("echo $TERM $PAGER; pwd")
    assert env["output"].split() == ["dumb", "cat", str(shell.ctx.workspace)]


async def test_a_git_config_replaced_on_the_host_stays_read_only_in_the_same_sandbox(
    shell: Shell, tmp_path: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    first = await shell("echo '[x]' >> .git/config; echo rc=$?")
    assert "rc=1" in first["output"]
    before = shell.server
    # as git writes its config: a new file renamed over the old (detaching the old bind)
    new = tmp_path / ".git" / "config.lock"
    new.write_text((tmp_path / ".git" / "config").read_text() + "# host edit\n")
    os.replace(new, tmp_path / ".git" / "config")
    r = await shell("echo '[hooks]' >> .git/config; echo rc=$?; tail -1 .git/config")
    assert "rc=1" in r["output"], r["output"]
    assert (tmp_path / ".git" / "config").read_text().endswith("# host edit\n")
    # the whole .git is bound (not its files): the same sandbox sees the new file, and
    # it is read-only there too
    assert "# host edit" in r["output"], r["output"]
    assert shell.server is before


async def test_a_dead_server_fails_its_commands_and_the_next_gets_a_new_one(
    shell: Shell,
) -> None:
    await shell("true")
    server = shell.server
    assert server is not None
    running = asyncio.create_task(shell("sleep 30"))
    await asyncio.sleep(0.3)
    os.kill(server.pid, signal.SIGKILL)  # bubblewrap itself, from the host
    started = time.monotonic()
    r = await running
    assert time.monotonic() - started < 5
    assert r["exit_code"] == 128 + signal.SIGKILL
    again = await shell("echo fresh")
    assert again["output"] == "fresh\n"
    assert shell.server is not server


async def test_a_command_too_large_for_the_server_runs_in_a_sandbox_of_its_own(
    shell: Shell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.sandbox.server import server_handle

    await shell("true")
    server = shell.server
    monkeypatch.setattr(server_handle, "MAX_REQUEST", 16 << 10)
    filler = "x" * (32 << 10)
    r = await shell(f": '{filler}'; echo ok > {tmp_path}/ok; echo x > /etc/codemode-big; echo $?")
    assert (tmp_path / "ok").read_text() == "ok\n"
    assert not Path("/etc/codemode-big").exists()
    assert r["output"].strip().endswith("1")
    assert shell.server is server


async def test_fifty_parallel_commands_in_one_server(shell: Shell) -> None:
    results = await asyncio.gather(*(shell(f"echo call-{i}") for i in range(50)))
    assert [r["output"] for r in results] == [f"call-{i}\n" for i in range(50)]
    assert shell.server is not None and shell.server.alive


async def test_the_server_ignores_malformed_requests(shell: Shell) -> None:
    await shell("true")
    server = shell.server
    assert server is not None
    for junk in (b"not json", b"[]", b'{"op": "run", "id": 999}', b'{"op": "kill", "id": "x"}'):
        server._sock.send(junk)
    r = await shell("echo fine")
    assert r["output"] == "fine\n" and shell.server is server


NOBODY_DRIVER = """
import asyncio, json, sys
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
ws, commands = Path(sys.argv[1]), json.loads(sys.argv[2])
async def main():
    s = SandboxSession(ws, SandboxSettings(approval_policy="never", backend="bubblewrap"))
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


def test_as_an_unprivileged_user_too(tmp_path: Path) -> None:
    why = nobody_unavailable()
    if why is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    from tests.confinement_support import REPO, SYSTEM_PYTHON, _as_nobody, _site_packages

    ws = Path(os.environ.get("TMPDIR", "/tmp")) / f"codemode-cs-{uuid.uuid4().hex[:8]}"
    ws.mkdir(mode=0o777)
    ws.chmod(0o777)
    try:
        t = _unique_seconds()
        commands = [f"setsid sleep {t} & echo one", "ps -eo args; id -u; kill -9 1; echo two"]
        env = {"PYTHONPATH": f"{REPO}:{_site_packages()}", "PATH": os.environ.get("PATH", ""),
               "HOME": str(ws)}  # fmt: skip
        p = subprocess.run(
            [*_as_nobody(), SYSTEM_PYTHON, "-c", NOBODY_DRIVER, str(ws), json.dumps(commands)],
            env=env, capture_output=True, text=True, cwd="/", timeout=120,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        one, two, served = json.loads(p.stdout)
        assert one == "one\n"
        assert f"sleep {t}" not in two and "65534" in two and two.endswith("two\n"), two
        assert served is True
    finally:
        subprocess.run(["rm", "-rf", str(ws)], check=False)


async def test_prewarm_in_a_running_loop_starts_the_server_the_first_command_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.sandbox.server import server_launch

    launched: list[int] = []
    real = server_launch.launch

    def launch(key: Any, *a: Any) -> Any:
        out = real(key, *a)
        launched.append(out._spawned[0].pid)
        return out

    monkeypatch.setattr(server_launch, "launch", launch)
    s = Shell(tmp_path)
    try:
        s.session.prewarm()
        task = s.session._prestarting
        assert task is not None
        await task
        assert len(launched) == 1 and s.server is None  # started, left for the command
        r = await s("echo first")
        assert r["output"] == "first\n"
        started = s.server
        assert started is not None and started.alive and started.pid == launched[0]
        assert (await s("echo second"))["output"] == "second\n"
        assert s.server is started and len(launched) == 1  # no second start
    finally:
        s.close()
    assert not started.alive  # closing the session ended it: bubblewrap exited and reaped
    assert not os.path.exists(f"/proc/{started.pid}")


def test_a_session_used_from_one_event_loop_after_another(tmp_path: Path) -> None:
    """An embedder calling ``asyncio.run`` per call: each loop gets a server of its own,
    the one of a closed loop is ended, and nothing is left running."""
    s = Shell(tmp_path)
    try:
        first = asyncio.run(s("echo one"))
        old = s.server
        second = asyncio.run(s("echo two"))
        assert (first["output"], second["output"]) == ("one\n", "two\n")
        assert old is not None and not old.alive and s.server is not old
    finally:
        s.close()


async def test_a_sandbox_whose_leftovers_would_not_end_is_ended_whole(shell: Shell) -> None:
    """The server says "stuck" when what a command left outran its kills (a fork bomb):
    the host then ends the whole sandbox, and the kernel empties its PID namespace."""
    await shell("true")
    server = shell.server
    assert server is not None
    first = asyncio.create_task(shell("sleep 30"))
    await asyncio.sleep(0.3)
    other = asyncio.create_task(shell("sleep 31"))
    await asyncio.sleep(0.3)
    job = min(server._jobs)  # as if the first had ended and its leftovers outran the kills
    server._report(json.dumps({"id": job, "exit": 0, "stuck": True}).encode())
    assert not server.alive
    assert (await asyncio.wait_for(first, 5))["exit_code"] == 0
    r = await asyncio.wait_for(other, 5)
    assert r["exit_code"] == 128 + signal.SIGKILL
    assert (await shell("echo next"))["output"] == "next\n" and shell.server is not server


async def test_requests_the_server_cannot_run_leave_it_serving(shell: Shell) -> None:
    """A NUL byte in the command, a variable name with "=": the command fails as it
    would in a sandbox of its own, and the server goes on."""
    await shell("true")
    server = shell.server
    assert server is not None
    with pytest.raises(Exception, match="null byte"):
        await shell("echo a\0b")
    assert server.alive
    r, w = os.pipe()
    try:
        proc = await server.run(["/bin/true"], cwd=Path("/"), env={"A=B": "1"}, output_fd=w)
    finally:
        os.close(w)
    assert await proc.wait() == 127
    assert b"environment" in os.read(r, 4096)
    os.close(r)
    assert (await shell("echo ok"))["output"] == "ok\n" and shell.server is server


@pytest.mark.parametrize("command_server", [True, False])
async def test_dev_is_read_only_while_its_devices_and_shm_work(
    tmp_path: Path, command_server: bool
) -> None:
    """No command can leave a file, or swap a link such as /dev/fd, in /dev for the
    commands after it to meet; the devices and /dev/shm work as usual."""
    s = Shell(tmp_path, command_server=command_server)
    script = tmp_path / "dev.py"
    script.write_text(
        "import os\n"
        "for act in (lambda: open('/dev/planted', 'w'), lambda: os.unlink('/dev/fd'),\n"
        "            lambda: os.symlink('/etc', '/dev/planted2')):\n"
        "    try:\n"
        "        act()\n"
        "        print('allowed')\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n"
        "open('/dev/null', 'w').write('x')\n"
        "open('/dev/shm/mine', 'w').write('x')\n"
        "print(open('/dev/shm/mine').read(), len(open('/dev/urandom', 'rb').read(8)))\n"
    )
    try:
        r = await s(f"{sys.executable} {script}")
    finally:
        s.close()
    lines = r["output"].splitlines()
    assert lines[:3] == ["refused 30", "refused 30", "refused 30"], r["output"]
    assert lines[3] == "x 8", r["output"]


async def test_what_a_command_left_in_shm_and_sysv_ipc_is_gone_for_the_next(
    shell: Shell,
) -> None:
    if subprocess.run(["sh", "-c", "command -v ipcmk"], capture_output=True).returncode:
        pytest.skip("ipcmk (util-linux) is not installed")
    first = await shell(
        f"ipcmk -M 4096 >/dev/null; ipcmk -S 2 >/dev/null; ipcmk -Q >/dev/null; "
        f"{sys.executable} -c \"open('/dev/shm/left', 'w').write('x')\"; "
        "ls /dev/shm; ipcs -m -s -q | grep -c '^0x'"
    )
    assert first["output"].split() == ["left", "3"], first["output"]
    second = await shell("ls /dev/shm | wc -l; ipcs -m -s -q | grep -c '^0x'; true")
    assert second["output"].split() == ["0", "0"], second["output"]


KILLED_DRIVER = """
import asyncio, sys
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
ws, t = Path(sys.argv[1]), sys.argv[2]
async def main():
    s = SandboxSession(ws, SandboxSettings(approval_policy="never", backend="bubblewrap"))
    ctx = ToolContext(workspace=ws, sandbox=s)
    print("ready", flush=True)
    await builtin_registry().invoke(
        "shell", {"command": f"setsid sleep {t} & sleep {t}", "timeout_ms": 600000}, ctx)
asyncio.run(main())
"""


def test_killing_codemode_ends_its_sandbox_and_everything_in_it(tmp_path: Path) -> None:
    t = _unique_seconds()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_DRIVER, str(tmp_path), t], stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not _host_has(f"sleep\0{t}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _host_has(f"sleep\0{t}"), "the command never started"
    finally:
        proc.kill()  # SIGKILL: no cleanup of its own runs
        proc.wait()
    deadline = time.monotonic() + 10
    while _host_has(f"sleep\0{t}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _host_has(f"sleep\0{t}")  # the namespace (and its PID 1, the server) ended
    assert not _host_has(str(tmp_path))  # and bubblewrap, which names the workspace


def test_policy_confinement_says_whether_the_command_server_works() -> None:
    exe = Path(sys.executable).parent / "interpreter"
    out = subprocess.run([str(exe), "policy", "confinement", "--json"], capture_output=True,
                         text=True, timeout=120, check=True).stdout  # fmt: skip
    assert json.loads(out)["command_server"] is None  # it starts and runs a command here
    text = subprocess.run([str(exe), "policy", "confinement"], capture_output=True, text=True,
                          timeout=120, check=True).stdout  # fmt: skip
    assert "command server  works: one bubblewrap per session" in text
