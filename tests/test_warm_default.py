"""Warm starts on by default, from the caller's side: with nothing set, the first command
runs cold and leaves a server, the next one is served by it; `CODEMODE_WARM=0` or
`warm = false` turns that off; a server left behind holds none of its callers'
descriptors (as root and as uid 65534), nor anything of one command in the next; and the
test suite's own servers end with the suite. All fail with warm starts off by default."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from warm_support import (
    AS_NOBODY,
    INTERPRETER,
    NOBODY,
    probe_server,
    served,
    socket_of,
    wait_for_server,
    warm_env,
)  # fmt: skip

from codemode.warm import place, start

TESTS = Path(__file__).resolve().parent


def _default_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who never heard of warm starts: no CODEMODE_WARM, no
    config file; a runtime folder of the test's own (short: a socket's path is bounded)."""
    base = Path(tempfile.mkdtemp(prefix="cmd-"))
    base.chmod(0o755)  # (uid 65534 too may reach it)
    runtime = base / "rt"
    runtime.mkdir(mode=0o777)
    runtime.chmod(0o777)  # whoever runs first makes its own private folder inside
    home = base / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("CODEMODE_WARM", "CODEMODE_TEST_RUNTIME")
    }
    env.update(XDG_RUNTIME_DIR=str(runtime), CODEMODE_HOME=str(home), CODEMODE_WARM_IDLE="60")
    env.update(extra)
    return env


@pytest.fixture
def default_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = _default_env(tmp_path)
    try:
        yield env
    finally:
        _stop_all(env)


def _stop_all(env: dict[str, str]) -> None:
    """Stop the servers in the test's runtime folder (as root: whoever started them)."""
    folder = Path(env["XDG_RUNTIME_DIR"]) / "codemode"
    for lock in folder.glob("warm-*.sock.lock") if folder.exists() else []:
        pid = _holder(lock)
        if pid:
            os.kill(pid, signal.SIGTERM)
            _until_gone(pid)
    shutil.rmtree(folder.parent.parent, ignore_errors=True)


def _holder(lock: Path) -> int:
    try:
        pid = int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return 0
    return pid if b"codemode.launch\0serve\0" + os.fsencode(str(lock))[:-5] in cmdline else 0


def _until_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_warm_is_on_unless_turned_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert place.enabled({"CODEMODE_HOME": str(home)})  # on by default
    assert place.enabled({"CODEMODE_HOME": str(home), "CODEMODE_WARM": ""})
    for off in ("0", "false", "no", "off", "OFF", " 0 "):
        assert not place.enabled({"CODEMODE_HOME": str(home), "CODEMODE_WARM": off}), off
    (home / "config.toml").write_text("warm = false\n")
    assert not place.enabled({"CODEMODE_HOME": str(home)})
    assert place.enabled({"CODEMODE_HOME": str(home), "CODEMODE_WARM": "1"})  # the variable wins
    (home / "config.toml").write_text('model = "warm-up"\n')  # "warm" in it, not the key
    assert place.enabled({"CODEMODE_HOME": str(home)})
    (home / "config.toml").write_text("warm = [\n")  # broken: the cold start says why
    assert not place.enabled({"CODEMODE_HOME": str(home)})


def test_the_config_key_turns_it_off_for_the_command_too(tmp_path: Path) -> None:
    """`warm = false` is a setting the command itself accepts (unknown keys are errors),
    and no server is left behind by a command so configured."""
    env = _default_env(tmp_path)
    try:
        (Path(env["CODEMODE_HOME"]) / "config.toml").write_text("warm = false\n")
        done = subprocess.run([INTERPRETER, "policy", "check", "--", "ls"], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0 and done.stdout.startswith("decision:"), done
        time.sleep(1)
        assert not place.serving(socket_of(env))
    finally:
        _stop_all(env)


def _links(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return found


def _children(pid: int) -> list[int]:
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(p) for p in f.read().split()]
    return kids


Done = subprocess.CompletedProcess[bytes]


def _run_holding_pipes(argv: list[str], env: dict[str, str], cwd: Path,
                       user: list[str]) -> tuple[Done, set[str]]:  # fmt: skip
    """Run ``argv`` with stdout/stderr pipes and one more pipe inherited (as CI runners
    and `make -j` hand their children one); return once every holder of the pipes has
    closed them (bounded: a holder that stays is the failure), and the pipes' identities."""
    extra_r, extra_w = os.pipe()
    try:
        proc = subprocess.Popen(user + argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(extra_w,))  # fmt: skip
    finally:
        held = {os.readlink(f"/proc/self/fd/{extra_w}")}
        os.close(extra_w)
    assert proc.stdout is not None and proc.stderr is not None
    held |= {os.readlink(f"/proc/self/fd/{f.fileno()}") for f in (proc.stdout, proc.stderr)}
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("a process outlived the command holding its output pipes") from None
    os.set_blocking(extra_r, False)
    deadline = time.monotonic() + 20
    while True:  # EOF on the extra pipe: nobody holds its writing end any more
        try:
            if os.read(extra_r, 1) == b"":
                break
        except BlockingIOError:
            assert time.monotonic() < deadline, (
                "a process outlived the command holding its extra pipe"
            )
            time.sleep(0.05)
    os.close(extra_r)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), held


@pytest.mark.parametrize("who", ["self", "nobody"])
def test_by_default_commands_are_served_by_a_server_holding_none_of_their_descriptors(
    tmp_path: Path, who: str
) -> None:
    """As this user, the first command (cold) leaves the server. As uid 65534 the
    server is started here as that user: on machines where Python lives in root's home
    (pyenv), a process of uid 65534 cannot start it again, so its cold start leaves
    none (it still runs, cold)."""
    if who == "nobody" and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        pytest.skip("needs root and setpriv to act as uid 65534")
    user = AS_NOBODY if who == "nobody" else []
    env = _default_env(tmp_path)
    work = Path(tempfile.mkdtemp(prefix="cmd-work-"))
    try:
        sock = _socket(env, user)
        argv = [INTERPRETER, "policy", "check", "--", "ls"]
        if who == "nobody":
            os.chown(env["CODEMODE_HOME"], NOBODY, NOBODY)
            os.chmod(work, 0o777)
            subprocess.Popen([*user, sys.executable, "-m", "codemode.launch", "serve", sock, "0"],
                             env=start.server_environment(env), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                             start_new_session=True)  # fmt: skip
            wait_for_server(sock)
        first, held = _run_holding_pipes(argv, env, work, user)
        assert first.returncode == 0 and first.stdout.startswith(b"decision:"), first
        wait_for_server(sock)  # left behind by a cold command, with nothing set
        server = place.serving(sock)
        assert server > 0
        second, held2 = _run_holding_pipes(argv, env, work, user)
        assert (second.returncode, second.stdout, second.stderr) == (
            first.returncode, first.stdout, first.stderr)  # fmt: skip
        assert served(sock) == (1 if who == "self" else 2)  # the server's runs
        time.sleep(1)  # its spare is forked once it has been quiet a while
        for pid in [server, *_children(server)]:
            links = _links(pid)
            assert not (held | held2) & links, (pid, links)
    finally:
        _stop_all(env)
        shutil.rmtree(work, ignore_errors=True)


WHERE = "from codemode.warm import place; print(place.socket_path())"


def _socket(env: dict[str, str], user: list[str]) -> str:
    if not user:
        return socket_of(env)
    done = subprocess.run(
        [*user, sys.executable, "-c", WHERE],
        env=env, capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done
    return done.stdout.strip()


STATE_JS = r"""
const r = await tools.shell({command: 'echo "${LEAK-unset}"; pwd; umask'});
console.log(r.output.trim());
"""


def test_nothing_of_one_command_reaches_the_next(
    default_env: dict[str, str], tmp_path: Path
) -> None:
    """Two callers of one server with different homes, environments, folders and
    umasks: each command sees its own, never the one before's."""
    sock = socket_of(default_env)
    (tmp_path / "state.js").write_text(STATE_JS)
    warmup = subprocess.run([INTERPRETER, "policy", "check", "--", "ls"], env=default_env,
                            capture_output=True, timeout=120)  # fmt: skip
    assert warmup.returncode == 0, warmup
    wait_for_server(sock)
    other = tmp_path / "other"
    other.mkdir()
    (other / "state.js").write_text(STATE_JS)
    other_home = tmp_path / "home2"
    other_home.mkdir()
    first = subprocess.run(
        ["sh", "-c", f'umask 077; exec "{INTERPRETER}" run state.js'],
        env=dict(default_env, LEAK="first-callers-secret", CODEMODE_HOME=str(other_home)),
        cwd=other, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    second = subprocess.run([INTERPRETER, "run", "state.js"], env=default_env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert served(sock) == 2
    assert first.stdout.split("\n")[0::2] == ["first-callers-secret", "0077"], first
    assert second.stdout.split("\n") == ["unset", str(tmp_path), "0022", ""], second


SUITE_TEST = r"""
import os, subprocess, sys, time
from pathlib import Path

def test_leaves_a_server(tmp_path):
    interpreter = str(Path(sys.executable).with_name("interpreter"))
    for _ in range(2):
        subprocess.run([interpreter, "policy", "check", "--", "ls"], check=True,
                       capture_output=True, timeout=120)
        from codemode.warm import place, start
        sock = place.socket_path()
        deadline = time.monotonic() + 60
        while not place.serving(sock):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    Path(os.environ["REPORT"]).write_text(f"{sock}\n{place.serving(sock)}\n")
"""


def test_the_suites_servers_end_with_the_suite(tmp_path: Path) -> None:
    """A pytest run with this suite's conftest: its commands' server lives in a runtime
    folder of the run's own, and is stopped (and the folder removed) when the run ends,
    not 15 minutes later; the run's pipes close at its end."""
    (tmp_path / "test_inner.py").write_text(SUITE_TEST)
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items()
           if k not in ("CODEMODE_WARM", "CODEMODE_TEST_RUNTIME", "XDG_RUNTIME_DIR",
                        "CODEMODE_WARM_IDLE") and not k.startswith("PYTEST")}  # fmt: skip
    env.update(REPORT=str(report), PYTHONPATH=str(TESTS), CODEMODE_HOME=str(tmp_path / "h"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "conftest",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sock, pid = report.read_text().split()
    assert not sock.startswith(f"/tmp/codemode-{os.geteuid()}/"), sock  # the run's own folder
    assert not Path(sock).parent.parent.exists(), sock  # removed with the run
    assert (
        not Path(f"/proc/{pid}").exists()
        or b"serve" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    )


def test_a_caller_killed_outright_takes_its_run_with_it_at_once(tmp_path: Path) -> None:
    """SIGKILL to a cold command ends it there: nothing it started writing goes on once
    the caller is reaped (a test, or CI's timeout, then inspects the files; a crash-
    consistency check runs the next command). A warm caller cannot pass SIGKILL on, so
    its end must be the run's: not a SIGTERM it may handle by writing on."""
    env = warm_env(tmp_path)
    out = tmp_path / "written"
    with probe_server(env, tmp_path / "log") as sock:
        proc = subprocess.Popen([INTERPRETER, "run", "writer", str(out)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        assert served(sock) == 0  # (counted once it ended)
        proc.kill()
        proc.wait(60)
        time.sleep(0.2)  # the server's SIGKILL follows the caller's end within milliseconds
        size = out.stat().st_size
        time.sleep(1)
        assert out.stat().st_size == size, "the run wrote on after its caller was killed"


def _runs(server: int) -> list[int]:
    """The server's runs in progress: its children named as the caller's script is (its
    spare keeps the server's name)."""
    return [pid for pid in _children(server)
            if Path(f"/proc/{pid}/comm").read_text().strip() == "interpreter"]  # fmt: skip


def test_a_server_left_by_a_command_that_ignores_sigterm_still_stops(tmp_path: Path) -> None:
    """A first command started under `nohup` (SIGTERM ignored) leaves the server; the
    server must not inherit that: `interpreter warm stop` (SIGTERM) ends it at once, even
    while it still waits for that first command to end."""
    env = _default_env(tmp_path)
    try:
        sock = socket_of(env)
        first = subprocess.Popen(
            [INTERPRETER, "run", "-"], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not place.serving(sock):
            assert time.monotonic() < deadline, "no server left"
            time.sleep(0.02)
        server = place.serving(sock)
        os.kill(server, signal.SIGTERM)  # what `interpreter warm stop` sends
        deadline = time.monotonic() + 5
        while Path(f"/proc/{server}").exists() and _state(server) != "Z":
            assert time.monotonic() < deadline, "the server ignored SIGTERM"
            time.sleep(0.02)
        assert first.stdin is not None
        first.stdin.close()
        first.wait(60)
    finally:
        _stop_all(env)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
