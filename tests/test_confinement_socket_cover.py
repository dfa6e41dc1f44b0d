"""With ``allow_unix_sockets`` naming one socket, no other socket of the user is reachable:
not one renamed after it was bound, not one bound after the session's sandbox started,
not the warm code-mode host's (which hands whoever connects a host process outside the
sandbox).

The attack (issue 38): the cover list read the bind-time names from ``/proc/net/unix``;
the warm server bound ``host-X.sock.PID`` and renamed it to ``host-X.sock``, so the real
name stayed uncovered and a confined command connected. Each test runs real commands
through a real ``SandboxSession`` in bubblewrap (command server on and off), as root and
as uid 65534 where the machine allows, against real listeners of the same user.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox.confinement.confine import probe
from tests.confinement_support import (
    NOBODY,
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    shared_dir,
    skip_unless,
)

__all__ = ["shared_dir"]

pytestmark = pytest.mark.skipif(
    probe().seccomp is not None, reason=f"seccomp: {probe().seccomp}"
)

# One session, several commands; between two commands the host may act (``between``).
DRIVER = """
import asyncio, json, sys
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
from codemode.tool_terms.errors import ToolError
ws, commands, settings = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
async def main():
    s = SandboxSession(ws, SandboxSettings(**settings))
    ctx, reg, out = ToolContext(workspace=ws, sandbox=s), builtin_registry(), []
    try:
        for c in commands:
            try:
                out.append((await reg.invoke("shell", {"command": c}, ctx))["output"])
            except ToolError as exc:  # a refusal: its message is the output
                out.append(f"refused: {exc}")
    finally:
        s.close()
    print(json.dumps(out))
asyncio.run(main())
"""

CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        print(path.rsplit("/", 1)[-1], "connected")
    except OSError as exc:
        print(path.rsplit("/", 1)[-1], type(exc).__name__)
    finally:
        s.close()
"""


def _env(user: str, ws: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "CODEMODE_HOME": str(ws.parent / "cm-home")}
    if user == "nobody":
        env.update(PYTHONPATH=f"{REPO}:{_site_packages()}", HOME=str(ws.parent))
        return [*_as_nobody(), SYSTEM_PYTHON], env
    return [sys.executable], env


def run_session(user: str, ws: Path, commands: list[str], **settings: object) -> list[str]:
    settings = {"approval_policy": "never", "backend": "bubblewrap", **settings}
    argv, env = _env(user, ws)
    argv += ["-c", DRIVER, str(ws), json.dumps(commands), json.dumps(settings)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    out: list[str] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def _listen(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)  # anyone may connect: only the sandbox stands in the way
    s.listen(8)
    return s


@pytest.fixture
def sockets(shared_dir: Path, user: str) -> Iterator[Path]:
    """A folder of this test's user holding ``allowed.sock`` and the sockets the
    attacks aim at: ``renamed.sock`` (bound as another name, renamed), ``linked.sock``
    (bound as another name, hard-linked, the first name removed: OpenSSH's control
    socket)."""
    folder = shared_dir / "sockets"
    folder.mkdir()
    held = [_listen(str(folder / "allowed.sock"))]
    held.append(_listen(str(folder / "renamed.sock.1234")))
    os.rename(folder / "renamed.sock.1234", folder / "renamed.sock")
    held.append(_listen(str(folder / "linked.sock.tmp")))
    os.link(folder / "linked.sock.tmp", folder / "linked.sock")
    os.unlink(folder / "linked.sock.tmp")
    if user == "nobody":
        for p in [folder, *folder.iterdir()]:
            os.lchown(p, NOBODY, NOBODY)
    try:
        yield folder
    finally:
        for s in held:
            s.close()


def _script(ws: Path) -> Path:
    script = ws / "connect.py"
    script.write_text(CONNECT)
    script.chmod(0o644)
    return script


def _python(user: str) -> str:
    return sys.executable if user == "self" else SYSTEM_PYTHON


@pytest.mark.parametrize("server", [True, False], ids=["server", "no-server"])
@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_socket_renamed_after_bind_is_covered(
    shared_dir: Path, sockets: Path, user: str, server: bool
) -> None:
    skip_unless(user, "bubblewrap")
    ws = shared_dir / "ws"
    ws.mkdir()
    give(ws, user)
    script = _script(ws)
    targets = " ".join(str(sockets / n) for n in ("allowed.sock", "renamed.sock", "linked.sock"))
    allowed = [str(sockets / "allowed.sock")]
    [out] = run_session(user, ws, [f"{_python(user)} {script} {targets}"],
                        command_server=server, allow_unix_sockets=allowed)  # fmt: skip
    lines = dict(line.split() for line in out.splitlines() if line.count(" ") == 1)
    assert lines.get("allowed.sock") == "connected", out  # the rule still lets it through
    assert lines.get("renamed.sock") not in (None, "connected"), out
    assert lines.get("linked.sock") not in (None, "connected"), out


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_socket_bound_after_the_sandbox_started_is_covered(
    shared_dir: Path, sockets: Path, user: str
) -> None:
    """The session's command server is running when the socket appears: the next
    command must not reach it."""
    skip_unless(user, "bubblewrap")
    ws = shared_dir / "ws"
    ws.mkdir()
    give(ws, user)
    script = _script(ws)
    late = sockets / "late.sock"
    trigger = ws / "bind-now"
    held: list[socket.socket] = []

    def bind_when_asked() -> None:
        for _ in range(600):
            if trigger.exists():
                held.append(_listen(str(late)))
                if user == "nobody":
                    os.lchown(late, NOBODY, NOBODY)
                return
            time.sleep(0.01)

    t = threading.Thread(target=bind_when_asked)
    t.start()
    try:
        commands = [f"touch {trigger} && sleep 1 && echo asked",
                    f"{_python(user)} {script} {late}"]  # fmt: skip
        first, second = run_session(
            user, ws, commands, allow_unix_sockets=[str(sockets / "allowed.sock")]
        )
    finally:
        t.join()
        for s in held:
            s.close()
    assert "asked" in first and held, first
    assert "late.sock" in second and "late.sock connected" not in second, second


WARM = """
import sys, time
from codemode.warm.server import Server
Server(sys.argv[1], lambda argv: 0, 60.0, [])
print("listening", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("server", [True, False], ids=["server", "no-server"])
@pytest.mark.parametrize("user", ["self", "nobody"])
def test_the_warm_host_servers_socket_is_covered(
    shared_dir: Path, sockets: Path, user: str, server: bool
) -> None:
    """A real warm server's listener (as it binds it), in a private folder of the
    command's own user: a command that connected would be handed a host process."""
    skip_unless(user, "bubblewrap")
    ws = shared_dir / "ws"
    ws.mkdir()
    give(ws, user)
    private = shared_dir / "run"
    private.mkdir(mode=0o700)
    give(private, user)
    path = private / "host-0123456789abcdef.sock"
    argv, env = _env(user, ws)
    warm = subprocess.Popen([*argv, "-c", WARM, str(path)], env=env, cwd="/",
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert warm.stdout is not None and warm.stdout.readline().strip() == "listening"
        script = _script(ws)
        [out] = run_session(user, ws, [f"{_python(user)} {script} {path}"],
                            command_server=server,
                            allow_unix_sockets=[str(sockets / "allowed.sock")])  # fmt: skip
    finally:
        warm.kill()
        warm.wait()
    assert path.name in out and f"{path.name} connected" not in out, out


def test_the_warm_server_binds_its_socket_at_its_final_name(tmp_path: Path) -> None:
    """The kernel lists it under the name clients connect to (it used to bind
    ``NAME.PID`` and rename it)."""
    from codemode.sandbox.confinement.unix_sockets import bound_socket_paths

    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    path = private / "host-0123456789abcdef.sock"
    warm = subprocess.Popen([sys.executable, "-c", WARM, str(path)], cwd="/",
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert warm.stdout is not None and warm.stdout.readline().strip() == "listening"
        listed = [p for p in bound_socket_paths() if p.parent == private]
    finally:
        warm.kill()
        warm.wait()
    assert listed == [path], listed


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_landlock_with_an_allow_list_reaches_no_other_socket(
    shared_dir: Path, sockets: Path, user: str
) -> None:
    """Landlock cannot tell socket files apart (no rule for connecting to one): with an
    allow-list every socket of the user would be reachable, so the command is refused,
    saying why, rather than run so."""
    skip_unless(user, "landlock")
    ws = shared_dir / "ws"
    ws.mkdir()
    give(ws, user)
    script = _script(ws)
    targets = " ".join(str(sockets / n) for n in ("renamed.sock", "linked.sock"))
    allowed = [str(sockets / "allowed.sock")]
    [out] = run_session(user, ws, [f"{_python(user)} {script} {targets}; echo ran"],
                        backend="landlock", allow_unix_sockets=allowed)  # fmt: skip
    assert "connected" not in out and "ran" not in out, out
    assert "allow_unix_sockets" in out and "bubblewrap" in out, out


def test_the_cover_list_holds_sockets_renamed_beside_their_bound_name(tmp_path: Path) -> None:
    from codemode.sandbox.confinement.unix_sockets import socket_files, to_hide

    folder = tmp_path / "s"
    folder.mkdir()
    held = [_listen(str(folder / "a.sock.99")), _listen(str(folder / "keep.sock"))]
    os.rename(folder / "a.sock.99", folder / "a.sock")
    (folder / "plain").write_text("not a socket")
    try:
        files = socket_files()
        assert str(folder / "a.sock") in files and str(folder / "plain") not in files
        hidden = to_hide([folder / "keep.sock"])
        assert folder / "a.sock" in hidden and folder / "keep.sock" not in hidden
    finally:
        for s in held:
            s.close()


def test_codemodes_runtime_folders_are_where_the_warm_server_puts_its_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.sandbox.protection.own_paths import own_paths
    from codemode.warm.place import socket_path

    for runtime in (str(tmp_path), None):
        if runtime is None:
            monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        else:
            monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
        folder = Path(socket_path()).parent
        assert folder in {o.path for o in own_paths()}, folder


@pytest.mark.parametrize("server", [True, False], ids=["server", "no-server"])
@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_root_holding_the_warm_hosts_folder_cannot_replace_its_socket(
    shared_dir: Path, user: str, server: bool
) -> None:
    """A command that could put a socket of its own in the warm host's place would be
    handed the next client's stdio (and a host's work)."""
    skip_unless(user, "bubblewrap")
    run = shared_dir / "run" / "codemode"
    run.mkdir(parents=True, mode=0o700)
    sock = run / "host-0123456789abcdef.sock"
    held = _listen(str(sock))
    (run / f"{sock.name}.lock").write_text("1\n")
    give(shared_dir, user)
    attack = (f"rm -f {sock}; echo evil > {sock}.lock; touch {run}/planted; "
              f"mv {run} {run}-aside; mkdir -p {run}; echo end")  # fmt: skip
    argv_env = {"XDG_RUNTIME_DIR": str(shared_dir / "run")}
    try:
        out = run_shell_env(user, shared_dir, attack, argv_env, command_server=server)
    finally:
        held.close()
    assert "end" in out.splitlines(), out
    assert os.path.exists(sock) and (run / f"{sock.name}.lock").read_text() == "1\n", out
    assert not (run / "planted").exists() and not (shared_dir / "run" / "codemode-aside").exists()


def run_shell_env(
    user: str, ws: Path, command: str, extra: dict[str, str], **settings: object
) -> str:
    from tests.confinement_support import run_shell

    r = run_shell(user, ws, command, extra_env=extra, backend="bubblewrap", **settings)
    return str(r["output"])
