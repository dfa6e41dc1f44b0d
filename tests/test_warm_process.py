"""A warm run's process is the one a cold start would be: the same argv, environment
(nothing of the server's), working folder, umask, limits, signal dispositions and mask,
standard streams; signals reach it; the caller gets its status; killing the caller
ends it. A probe run (``warm_support.PROBE``) reports its process, and the same probe
started cold is the reference. All of these fail without ``codemode.warm`` (there is no
server to start, and the launcher is ``codemode.cli``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from warm_support import (
    AS_NOBODY,
    INTERPRETER,
    NOBODY,
    caller_limits,
    probe_cold,
    probe_server,
    probe_state,
    processes_of,
    served,
    warm_env,
)  # fmt: skip


def test_a_warm_run_has_exactly_what_a_cold_one_would(tmp_path: Path) -> None:
    env = warm_env(tmp_path, TZ="Asia/Kolkata")
    with probe_server(env, tmp_path / "log") as sock:
        # The caller's environment differs from the server's in every way but the
        # start variables: a secret and a folder of its own, one of the server's gone.
        caller = dict(env, SECRET_TOKEN="s3cr3t", WEIRD="a\nb=c", EMPTY="")
        caller.pop("HOME", None)
        work = tmp_path / "work folder"
        work.mkdir()
        caller["TMPDIR"] = str(work)  # (the server worked out its own at start)
        warm = probe_state([INTERPRETER, "run", "state", "stdin"], caller, work, b"from stdin\n")
        assert served(sock) == 1, "the warm server ran it"
        cold = probe_state(probe_cold(["run", "state", "stdin"]), caller, work, b"from stdin\n")
    assert warm["env"] == caller  # exactly: nothing of the server's environment
    assert warm["cwd"] == str(work)
    assert warm["umask"] == 0o027
    assert warm["stdin"] == "from stdin\n"
    assert warm["tz"] == cold["tz"]
    assert warm["tempdir"] == cold["tempdir"] == str(work)
    # The console script's folder, as Python puts it first for a script.
    assert warm["path0"] == os.path.dirname(os.path.realpath(INTERPRETER))
    assert warm["comm"] == "interpreter"  # what pgrep and top show
    for field in ("argv", "env", "cwd", "umask", "rlimits", "ignored", "int_handler",
                  "blocked", "ttys", "line_buffered", "fds", "stdin", "affinity", "nice",
                  "oom_score_adj", "cgroup", "tempdir"):  # fmt: skip
        assert warm[field] == cold[field], field
    # A process group of its own (docs/warm.md: as a shell's foreground job would be).
    assert warm["own_group"]


def _narrowed() -> None:
    """As ``taskset -c 0`` and a raised OOM score (``choom``) would start a command."""
    caller_limits()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("500")


def test_a_caller_pinned_to_a_cpu_or_with_another_oom_score_is_not_run_as_the_server(
    tmp_path: Path,
) -> None:
    """A forked process has the server's CPU affinity, memory nodes, OOM score and
    control group, not the caller's: a caller that differs in any of them must not be
    run by that server (it reaches another, or starts cold)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no narrower affinity to start the caller with")
    env = warm_env(tmp_path)
    # Run cold, `run state` is this program (the probe server's run reports its process).
    (tmp_path / "state").write_text('console.log("started cold")\n')
    with probe_server(env, tmp_path / "log") as sock:
        done = subprocess.run([INTERPRETER, "run", "state"], env=env, cwd=tmp_path,
                              capture_output=True, timeout=120, preexec_fn=_narrowed)  # fmt: skip
        assert served(sock) == 0, "the server ran a caller it could not pass for"
    assert done.returncode == 0, done
    assert b"started cold" in done.stdout


def test_a_folder_the_caller_cannot_name_any_more_is_still_its_folder(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        gone = tmp_path / "gone"
        gone.mkdir()
        proc = subprocess.Popen(
            ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{INTERPRETER}" run state'],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out)["cwd"] == f"{gone} (deleted)" or not os.path.exists(gone)
        assert served(sock) == 1


def test_the_exit_status_is_the_runs(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        for status in (0, 1, 7, 255):
            done = subprocess.run([INTERPRETER, "run", "exit", str(status)], env=env,
                                  capture_output=True, timeout=120)  # fmt: skip
            assert done.returncode == status, (done, (tmp_path / "log").read_text())
        assert served(sock) == 4


def _ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == b"ready\n", (line, proc.stderr.read() if proc.stderr else b"")


def _runs_of(server_log_dir: Path, sock: str) -> list[int]:
    """The pids of the server's runs: its children but a spare (one forked ahead for the
    next caller, which still has the server's name; a run has its caller's)."""
    from codemode.warm import place

    pid = place.serving(sock)
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(p) for p in f.read().split()]
    return [child for child in children if _name(child) not in (_name(pid), None)]


def _name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None


@pytest.mark.parametrize("number, status", [
    (signal.SIGINT, -signal.SIGINT),  # an unhandled Ctrl-C: killed by SIGINT, as Python is
    (signal.SIGTERM, -signal.SIGTERM),
    (signal.SIGHUP, -signal.SIGHUP),
])  # fmt: skip
def test_a_signal_to_the_caller_ends_the_run_as_it_would_a_cold_one(
    tmp_path: Path, number: int, status: int
) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        outcomes = []
        for argv in ([INTERPRETER, "run", "sleep"], probe_cold(["run", "sleep"])):
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)  # fmt: skip
            _ready(proc)
            proc.send_signal(number)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                raise AssertionError(processes_of(proc.pid, sock, tmp_path / "log")) from None
            outcomes.append(proc.returncode)
        assert outcomes == [status, status]
        assert served(sock) == 1
        assert _runs_of(tmp_path, sock) == []


def test_winch_hup_usr1_and_cont_reach_the_run(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    notes = tmp_path / "notes"
    with probe_server(env, tmp_path / "log") as sock:
        proc = subprocess.Popen([INTERPRETER, "run", "signals", str(notes)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _ready(proc)
        sent = [signal.SIGWINCH, signal.SIGUSR1, signal.SIGHUP, signal.SIGCONT]
        for number in sent:
            proc.send_signal(number)
            deadline = time.monotonic() + 30
            while str(int(number)) not in (notes.read_text() if notes.exists() else ""):
                assert time.monotonic() < deadline, (
                    f"{number!r} never arrived:\n{processes_of(proc.pid, sock, tmp_path / 'log')}"
                )
                time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == -signal.SIGTERM
        assert served(sock) == 1


def test_ctrl_z_stops_the_run_and_fg_continues_it(tmp_path: Path) -> None:
    """SIGTSTP stops the caller (the shell sees a stopped job) and its run; SIGCONT
    continues both."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        # In a process group of its own, as a shell with job control starts a job: the
        # kernel discards SIGTSTP's stop for a process of an orphaned group, cold or warm
        # (the test runner's own group is one under CI, which has no terminal).
        proc = subprocess.Popen([INTERPRETER, "run", "sleep"], env=env, process_group=0,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _ready(proc)
        (run,) = _runs_of(tmp_path, sock)
        proc.send_signal(signal.SIGTSTP)
        wait_status = _wait_stopped(proc.pid)
        assert os.WIFSTOPPED(wait_status)
        deadline = time.monotonic() + 30
        while _process_state(run) != "T":
            assert time.monotonic() < deadline, "the run was never stopped"
            time.sleep(0.02)
        proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 30
        while _process_state(run) == "T":
            assert time.monotonic() < deadline, "the run was never continued"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == -signal.SIGINT


def _wait_stopped(pid: int, timeout_s: float = 60) -> int:
    """``waitpid(pid, WUNTRACED)`` with a deadline: a caller that never stops fails the
    test instead of hanging the suite."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, wait_status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if done:
            return wait_status
        assert time.monotonic() < deadline, "the caller never stopped"
        time.sleep(0.02)


def _links(folder: str) -> list[str]:
    found = []
    for name in os.listdir(folder):
        try:
            found.append(os.readlink(f"{folder}/{name}"))
        except FileNotFoundError:
            pass  # closed while we looked
    return found


def _process_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # reaped while we looked
        return "gone"


def test_killing_the_caller_ends_the_run(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        proc = subprocess.Popen([INTERPRETER, "run", "sleep"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _ready(proc)
        (run,) = _runs_of(tmp_path, sock)
        proc.kill()
        proc.wait(60)
        deadline = time.monotonic() + 30
        while _process_state(run) not in ("Z", "gone"):
            assert time.monotonic() < deadline, "the run outlived its caller"
            time.sleep(0.05)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as another user (uid 65534)")  # fmt: skip
def test_as_uid_65534_a_warm_run_is_a_cold_one_too(tmp_path: Path) -> None:
    """The same comparison with server, caller and reference all uid 65534's (the
    server runs as the user who asked for it, nothing of root's)."""
    public = Path(tempfile.mkdtemp(prefix="warm-nobody-"))
    try:
        public.chmod(0o755)
        work = public / "work"
        work.mkdir()
        os.chown(work, NOBODY, NOBODY)
        env = warm_env(tmp_path, HOME=str(work), CODEMODE_HOME=str(work / "home"))
        os.chown(env["XDG_RUNTIME_DIR"], NOBODY, NOBODY)
        with probe_server(env, tmp_path / "log", user=AS_NOBODY) as sock:
            assert os.stat(sock).st_uid == NOBODY
            warm = probe_state([*AS_NOBODY, INTERPRETER, "run", "state", "stdin"], env, work, b"x")
            assert served(sock) == 1, (tmp_path / "log").read_text()
            cold = probe_state(
                [*AS_NOBODY, *probe_cold(["run", "state", "stdin"])], env, work, b"x"
            )
            proc = subprocess.Popen(
                [*AS_NOBODY, INTERPRETER, "run", "sleep"], env=env, cwd=work,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            _ready(proc)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(60) == -signal.SIGINT
            assert served(sock) == 2
    finally:
        shutil.rmtree(public, ignore_errors=True)
    for field in ("argv", "env", "cwd", "umask", "rlimits", "ignored", "int_handler",
                  "blocked", "ttys", "line_buffered", "fds", "stdin"):  # fmt: skip
        assert warm[field] == cold[field], field


def test_nothing_of_one_command_reaches_the_next(tmp_path: Path) -> None:
    """A secret of one caller is in no later run nor in the spare waiting for it; the
    spare holds no descriptor but the server's /dev/null and log and its channel."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        first = probe_state([INTERPRETER, "run", "state"], dict(env, FIRST_SECRET="s1"), tmp_path)
        assert first["env"]["FIRST_SECRET"] == "s1"
        second = probe_state([INTERPRETER, "run", "state"], env, tmp_path)
        assert "FIRST_SECRET" not in second["env"] and served(sock) == 2
        from codemode.warm import place

        server = place.serving(sock)
        deadline = time.monotonic() + 30
        while True:
            with open(f"/proc/{server}/task/{server}/children") as f:
                spares = [int(p) for p in f.read().split()]
            if spares:
                break
            assert time.monotonic() < deadline, "no spare was made"
            time.sleep(0.05)
        (spare,) = spares
        with open(f"/proc/{spare}/environ", "rb") as f:
            assert b"FIRST_SECRET" not in f.read()
        fds = f"/proc/{spare}/fd"
        expected = sorted(["/dev/null", str(tmp_path / "log"), str(tmp_path / "log")])
        deadline = time.monotonic() + 30
        while True:  # (a spare just forked closes the server's descriptors first)
            held = sorted(_links(fds))
            files = [h for h in held if not h.startswith("socket:")]
            if files == expected and len(held) == 4:  # 0-2 and its channel
                break
            assert time.monotonic() < deadline, held
            time.sleep(0.05)


@pytest.mark.parametrize("killed", ["caller", "server"])
def test_a_run_stopped_by_ctrl_z_still_ends_with_its_caller_or_server(
    tmp_path: Path, killed: str
) -> None:
    """A stopped process holds SIGTERM until continued; nobody would continue a run
    whose caller or server is gone (a stopped run outliving both was seen)."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        from codemode.warm import place

        server = place.serving(sock)
        proc = subprocess.Popen([INTERPRETER, "run", "sleep"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _ready(proc)
        (run,) = _runs_of(tmp_path, sock)
        proc.send_signal(signal.SIGTSTP)
        deadline = time.monotonic() + 30
        while _process_state(run) != "T":
            assert time.monotonic() < deadline, "the run was never stopped"
            time.sleep(0.02)
        os.kill(proc.pid if killed == "caller" else server, signal.SIGKILL)
        if killed == "server":
            proc.send_signal(signal.SIGCONT)  # `fg`: the caller learns its server is gone
            status = proc.wait(60)
            assert status == 70, proc.stderr.read() if proc.stderr else b""
        proc.wait(60)
        deadline = time.monotonic() + 30
        while _process_state(run) not in ("Z", "gone"):
            assert time.monotonic() < deadline, f"a stopped run outlived its {killed}"
            time.sleep(0.05)
