"""Patches and file writes survive kill -9: whatever point a process dies at, the next
codemode touch of the workspace leaves the tree as it was before or as the patch makes
it, never between, with no temporary file and no folder left behind (the journal,
``codemode.tools.store.journal``). Every kill here is a real SIGKILL of a real process."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

INTERPRETER = Path(sys.executable).parent / "interpreter"


def tree_state(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: a file's bytes and mode, a link's target, a folder."""
    state: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir",)
            else:
                state[rel] = ("file", p.read_bytes(), stat.S_IMODE(st.st_mode))
    return state


def journals(home: Path) -> list[str]:
    folder = home / "journal"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "CODEMODE_HOME": str(home)}


# --- a small patch killed at every step --------------------------------------------------

SMALL_PATCH = """*** Begin Patch
*** Update File: a.txt
@@
-alpha
+ALPHA
*** Add File: new/deep/n.txt
+new
*** Delete File: gone.txt
*** Update File: old.txt
*** Move to: moved/m.txt
@@
-old
+OLD
*** Delete File: link.txt
*** Add File: exec.sh
+#!/bin/sh
*** End Patch
"""


def small_tree(ws: Path) -> None:
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "gone.txt").write_text("gone\n")
    (ws / "old.txt").write_text("old\n")
    (ws / "exec.sh").write_text("echo hi\n")
    (ws / "exec.sh").chmod(0o755)
    (ws / "target.txt").write_text("target\n")
    (ws / "link.txt").symlink_to("target.txt")


# Run in a child: every call that changes the disk counts as a step, and the child kills
# itself with SIGKILL just before step ``n`` (no cleanup, no finally, as kill -9). The
# children are forked from one process a test that has imported what they run (a fresh
# interpreter each cost ~0.25 CPU-s, and a test kills some 20): each child installs the
# counting wrappers and runs the write as a fresh process would after those imports.
# Source for a child: ``kill_at_step(n)`` makes every call that changes the disk count as
# a step and SIGKILLs the process just before step ``n``; it returns the counter.
KILL_AT_STEP = """
import os, signal

def kill_at_step(n):
    count = [0]
    def step(real):
        def wrapped(*a, **k):
            count[0] += 1
            if count[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        return wrapped
    for name in ("rename", "unlink", "mkdir", "rmdir", "symlink", "fchmod", "write"):
        setattr(os, name, step(getattr(os, name)))
    real_open = os.open
    def opened(path, flags, *a, **k):
        if flags & os.O_CREAT:
            count[0] += 1
            if count[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return real_open(path, flags, *a, **k)
    os.open = opened
    return count
"""

KILLER = KILL_AT_STEP + """
import json, os, signal, sys, traceback
import asyncio, pathlib
from codemode.tools.patch import apply_patch_text
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext
from codemode.tools.edit import EDIT

def run(n, mode, ws, stdin):
    count = kill_at_step(n)
    if mode == "patch":
        apply_patch_text(stdin, ws)
    else:
        r = builtin_registry(); r.add(EDIT)
        args = {"write": {"path": "fresh/dir/w.txt", "content": "w\\n"},
                "edit": {"path": "a.txt", "old_string": "beta", "new_string": "BETA"},
                "tool": {"input": stdin}}[mode]
        name = {"write": "write_file", "edit": "edit", "tool": "apply_patch"}[mode]
        asyncio.run(r.invoke(name, args, ToolContext(workspace=pathlib.Path(ws))))
    print("DONE", count[0])

answers = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            for fd, path in ((1, req["out"]), (2, req["err"])):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(f, fd)
                os.close(f)
            os.environ.clear()
            os.environ.update(req["env"])
            run(req["n"], req["mode"], req["ws"], req["stdin"])
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps(os.waitstatus_to_exitcode(status)) + "\\n")
    answers.flush()
"""


class Killer:
    """The process the killed children are forked from (``KILLER``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.proc = subprocess.Popen([sys.executable, "-c", KILLER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(
        self, n: int, mode: str, ws: Path, home: Path, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out, err = self.folder / "killed.out", self.folder / "killed.err"
        request = {"n": n, "mode": mode, "ws": str(ws), "stdin": stdin, "env": env_for(home),
                   "out": str(out), "err": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the killer process ended: {self.proc.wait()}"
        return subprocess.CompletedProcess(
            [mode, str(n)], json.loads(line), out.read_text(), err.read_text()
        )

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def killer(tmp_path: Path) -> Iterator[Killer]:
    k = Killer(tmp_path)
    try:
        yield k
    finally:
        k.close()


def recover_in(ws: Path, home: Path) -> list[str]:
    """The next codemode touch, in a fresh process: the store's recovery."""
    code = (
        "import sys, pathlib\nfrom codemode.tools.store.journal import recover\n"
        "print('\\n'.join(recover(pathlib.Path(sys.argv[1]))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ws)],
        capture_output=True,
        text=True,
        env=env_for(home),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


@pytest.mark.parametrize("mode", ["patch", "tool", "write", "edit"])
def test_killed_at_every_step_is_before_or_after(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch, killer: Killer
) -> None:
    from codemode.tools.store.journal import recover

    base = tmp_path / "base"
    small_tree(base)
    before = tree_state(base)
    # The whole run once, unkilled: the "after" state.
    done = tmp_path / "done"
    shutil.copytree(base, done, symlinks=True)
    home = tmp_path / "home"
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    proc = killer.run(0, mode, done, home, SMALL_PATCH)
    assert proc.returncode == 0, proc.stderr
    after = tree_state(done)
    assert after != before
    assert journals(home) == []
    between = 0
    for n in range(1, 200):
        ws = tmp_path / f"ws{n}"
        shutil.copytree(base, ws, symlinks=True)
        proc = killer.run(n, mode, ws, home, SMALL_PATCH)
        if proc.returncode == 0:
            assert tree_state(ws) == after
            break  # no step n: every point has been tried
        assert proc.returncode == -signal.SIGKILL, (n, proc.stdout, proc.stderr)
        if tree_state(ws) not in (before, after):
            between += 1
        recover(ws)  # what the next touch of the workspace does first
        state = tree_state(ws)
        assert state in (before, after), f"killed before step {n}: {state}"
        assert journals(home) == [], n
    else:
        raise AssertionError("the run never finished")
    # Some kills did land between the two states (else this proves nothing).
    assert between > 0


def test_recovery_leaves_a_file_changed_since_and_says_so(
    tmp_path: Path, killer: Killer
) -> None:
    base = tmp_path / "ws"
    small_tree(base)
    home = tmp_path / "home"
    # Find a step at which a.txt is already patched but the patch is unfinished.
    for n in range(1, 200):
        ws = tmp_path / f"w{n}"
        shutil.copytree(base, ws, symlinks=True)
        proc = killer.run(n, "patch", ws, home, SMALL_PATCH)
        assert proc.returncode == -signal.SIGKILL
        if (ws / "a.txt").read_text() == "ALPHA\nbeta\n":
            break
        recover_in(ws, home)
    (ws / "a.txt").write_text("the user's own edit\n")
    report = recover_in(ws, home)
    assert (ws / "a.txt").read_text() == "the user's own edit\n"
    assert any("a.txt: changed since; left as it is" in line for line in report), report
    assert "rolled back an interrupted write" in report[0]
    assert (ws / "gone.txt").read_text() == "gone\n"
    # The original of the file left as it is stays readable, in the journal kept.
    kept = [j for j in journals(home) if j.endswith(".kept")]
    assert len(kept) == 1 and b"alpha\nbeta\n" in (home / "journal" / kept[0]).read_bytes()
    assert "are kept in" in report[-1]


def test_a_journal_of_a_live_commit_is_not_touched(tmp_path: Path) -> None:
    """A commit still running in another process holds its journal's lock: recovery
    leaves it (and the files) alone."""
    from codemode.tools.store import journal

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("new\n")
    home = tmp_path / "home"
    entry = journal.Entry(
        ws / "f.txt",
        before=b"old\n",
        after=__import__("hashlib").sha256(b"new\n").hexdigest(),
    )
    os.environ["CODEMODE_HOME"] = str(home)
    try:
        rec = journal.begin(ws, [ws], [entry], "abc123")
        assert rec.path is not None
        # Another process tries while the lock is held.
        assert recover_in(ws, home) == []
        assert (ws / "f.txt").read_text() == "new\n"
        assert rec.path.exists()
        rec.close(keep=True)  # as if the process died: the journal stays
        report = recover_in(ws, home)
        assert (ws / "f.txt").read_text() == "old\n"
        assert "1 file(s) restored" in report[0]
    finally:
        del os.environ["CODEMODE_HOME"]


def test_a_tampered_journal_is_set_aside_not_obeyed(tmp_path: Path) -> None:
    from codemode.tools.store import journal

    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (ws / "f.txt").write_text("new\n")
    home = tmp_path / "home"
    digest = __import__("hashlib").sha256(b"new\n").hexdigest()
    os.environ["CODEMODE_HOME"] = str(home)
    try:
        # 1. bytes changed after writing: the checksum fails.
        rec = journal.begin(
            ws, [ws], [journal.Entry(ws / "f.txt", before=b"old\n", after=digest)], "t1"
        )
        assert rec.path is not None
        rec.close(keep=True)
        data = rec.path.read_bytes().replace(b"f.txt", b"g.txt")
        rec.path.write_bytes(data)
        report = recover_in(ws, home)
        assert "ignored a damaged write journal (checksum mismatch)" in report[0]
        assert (ws / "f.txt").read_text() == "new\n"
        # 2. a well-formed journal naming a path outside its roots.
        entry = journal.Entry(
            outside,
            before=b"owned\n",
            after=__import__("hashlib").sha256(b"precious\n").hexdigest(),
        )
        rec = journal.begin(ws, [ws], [entry], "t2")
        assert rec.path is not None
        rec.close(keep=True)
        report = recover_in(ws, home)
        assert "outside the journal's roots" in report[0]
        assert outside.read_text() == "precious\n"
        # 3. roots widened to reach it: the protected-path walk still refuses .git.
        git = ws / ".git"
        git.mkdir()
        (git / "config").write_text("[core]\n")
        entry = journal.Entry(
            git / "config",
            before=b"[core]\n\tfsmonitor = evil\n",
            after=__import__("hashlib").sha256(b"[core]\n").hexdigest(),
        )
        rec = journal.begin(ws, [ws], [entry], "t3")
        assert rec.path is not None
        rec.close(keep=True)
        report = recover_in(ws, home)
        assert (git / "config").read_text() == "[core]\n"
        assert "read-only" in "\n".join(report)
    finally:
        del os.environ["CODEMODE_HOME"]


# --- the CLI, a 3,000-file patch, killed at random --------------------------------------


def big_workspace(ws: Path) -> str:
    """A tree of 2,250 files and a patch of 3,000 operations over it: 750 updates, 750
    adds (half in new folders), 750 deletes, 750 moves (some into new folders)."""
    ws.mkdir()
    ops: list[str] = []
    for i in range(2250):
        d = ws / f"d{i % 30}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"line one {i}\nline two {i}\nline three {i}\n")
    for i in range(750):
        ops.append(
            f"*** Update File: d{i % 30}/f{i}.txt\n@@\n line one {i}\n"
            f"-line two {i}\n+LINE TWO {i}\n"
        )
    for i in range(750):
        folder = f"new{i % 40}/" if i % 2 else f"d{i % 30}/"
        ops.append(f"*** Add File: {folder}added{i}.txt\n+added {i}\n")
    for i in range(750, 1500):
        ops.append(f"*** Delete File: d{i % 30}/f{i}.txt\n")
    for i in range(1500, 2250):
        dest = f"moved{i % 20}/g{i}.txt" if i % 3 == 0 else f"d{(i + 1) % 30}/g{i}.txt"
        ops.append(
            f"*** Update File: d{i % 30}/f{i}.txt\n*** Move to: {dest}\n"
            f"@@\n-line three {i}\n+moved {i}\n"
        )
    return "*** Begin Patch\n" + "".join(ops) + "*** End Patch\n"


def copy_tree(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def test_apply_patch_killed_at_random_points(tmp_path: Path) -> None:
    base = tmp_path / "base"
    text = big_workspace(base)
    patch_file = tmp_path / "big.patch"
    patch_file.write_text(text)
    before = tree_state(base)
    home = tmp_path / "home"
    # Cold (CODEMODE_WARM=0): the test reads the tree the moment its SIGKILL'd process is
    # reaped, and a warm run, the warm server's child, is killed by the server just after
    # (tests/test_warm_default.py holds that it is killed at once and writes no more).
    env = {**env_for(home), "CODEMODE_WARM": "0"}
    command = [str(INTERPRETER), "apply-patch", str(patch_file), "--cwd"]
    # One whole run: the "after" state, how long it takes and when its commit starts.
    done = tmp_path / "done"
    copy_tree(base, done)
    started = time.monotonic()
    child = subprocess.Popen([*command, str(done)], stdout=subprocess.DEVNULL, env=env)
    while not journals(home) and child.poll() is None:
        time.sleep(0.002)
    committing = time.monotonic()
    assert child.wait(timeout=600) == 0
    ended = time.monotonic()
    after = tree_state(done)
    assert after != before
    rng = random.Random(int(os.environ.get("CODEMODE_TEST_SEED", "26")))
    rounds = int(os.environ.get("CODEMODE_KILL_ROUNDS", "8"))
    outcomes = {"before": 0, "after": 0, "between": 0}
    ws = tmp_path / "ws"
    for round_ in range(rounds):
        copy_tree(base, ws)
        child = subprocess.Popen([*command, str(ws)], stdout=subprocess.DEVNULL, env=env)
        if round_ % 2:
            # Anywhere in the run, from start-up to the end.
            time.sleep(rng.uniform(0, ended - started))
        else:
            # Inside the commit: from the moment its journal exists.
            while not journals(home) and child.poll() is None:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, ended - committing))
        child.send_signal(signal.SIGKILL)
        child.wait()
        state = tree_state(ws)
        outcomes["before" if state == before else "after" if state == after else "between"] += 1
        # The next touch: another apply-patch (one that fails, so it changes nothing itself).
        touch = subprocess.run(
            [str(INTERPRETER), "apply-patch", "-", "--cwd", str(ws)],
            input="*** Begin Patch\n*** Delete File: no-such-file\n*** End Patch\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert touch.returncode == 1, touch.stderr
        if state not in (before, after):
            assert "rolled back an interrupted write" in touch.stderr
        state = tree_state(ws)
        assert state in (before, after), f"round {round_}: between before and after"
        assert not [p for p in ws.rglob("*.tmp")], round_
        assert journals(home) == [], round_
    print("outcomes of the kills before recovery:", outcomes)
    # Some kills landed mid-commit, where the tree was between (else nothing was shown).
    assert outcomes["between"] > 0, outcomes


def test_a_session_started_in_the_workspace_rolls_back_first(
    tmp_path: Path, killer: Killer
) -> None:
    """The next touch can be a whole session: it rolls back before the model reads a
    file, and says so."""
    from agent_support import provider_flags, run_cli

    from codemode_testkit.scripted_server import ScriptedModelServer

    home = tmp_path / "home"
    home.mkdir()
    base = tmp_path / "base"
    small_tree(base)
    before = tree_state(base)
    for n in range(4, 200):
        ws = tmp_path / f"w{n}"
        shutil.copytree(base, ws, symlinks=True)
        proc = killer.run(n, "patch", ws, home, SMALL_PATCH)
        assert proc.returncode == -signal.SIGKILL
        if tree_state(ws) != before:
            break  # killed between: a.txt patched, the rest not
    left = journals(home)  # (those of the workspaces killed before any change, too)
    with ScriptedModelServer([{"text": "done"}]) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "hi"], home=home, cwd=ws)
    assert run.code == 0, run.stderr
    assert "rolled back an interrupted write" in run.stderr
    assert tree_state(ws) == before
    assert len(journals(home)) == len(left) - 1  # this workspace's, and only it


def test_without_a_writable_home_a_patch_still_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No journal can be written (codemode's home is a file here): the patch is applied
    as before, unprotected against a kill, rather than refused."""
    from codemode.tools.patch import apply_patch_text

    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    ws = tmp_path / "ws"
    small_tree(ws)
    outcome = apply_patch_text(SMALL_PATCH, ws)
    assert [c.kind for c in outcome.changes] == ["update", "add", "delete", "move", "delete", "add"]
    assert (ws / "a.txt").read_text() == "ALPHA\nbeta\n"
    assert not [p for p in ws.rglob("*.tmp")]
