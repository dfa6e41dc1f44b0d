"""Attacks on what the host moves, removes and puts back after a confined command.

After each command the session sets aside the ``.git`` and ``.codemode`` entries a command
made (``git_sanity``, ``codemode_watch``) and puts back git's protected files
(``git_guard``). Another command of the same session may still be running then
(``Promise.all``), so each attack here is made by "a concurrent command" at the worst
moment: an audit hook fires before each filesystem call the host makes, and the attack
is made before the N-th one, for every N in turn. What must hold: nothing outside the
workspace is moved or removed, and the host never hangs.

Each runs as root and as nobody (uid 65534): the scenario is a script run in a fresh
interpreter as that user (``confinement_support``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.confinement_support import (
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    nobody_unavailable,
    shared_dir,
)

__all__ = ["shared_dir"]  # the fixture, used by name

# Shared by every scenario: ``attack_at_each_step(setup, op, attack, intact)`` runs
# ``op`` once per step N, with ``attack`` made just before the host's N-th filesystem
# call, until a run ends before step N; returns the steps at which ``intact`` failed.
COMMON = r"""
import inspect, json, os, shutil, signal, stat, sys
from pathlib import Path

_EVENTS = {"open", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.symlink",
           "os.listdir", "os.scandir", "shutil.rmtree", "ctypes.call_function", "os.chmod"}
_state = {"armed": False, "busy": False, "count": 0, "at": -1, "fired": False,
          "attack": None}

def _hook(event, args):
    s = _state
    if not s["armed"] or s["busy"] or s["fired"] or event not in _EVENTS:
        return
    if s["count"] == s["at"]:
        s["busy"] = True
        try:
            s["attack"]()
        finally:
            s["busy"] = False
        s["fired"] = True
    s["count"] += 1

sys.addaudithook(_hook)

def with_roots(fn, *args, roots):
    # The set-aside functions take the writable roots since they go through the
    # writer; the code they replaced did not. Called either way, so that this test
    # runs against both.
    n = len(inspect.signature(fn).parameters)
    return fn(*args, *([roots] if n > len(args) else []))

def attack_at_each_step(setup, op, attack, intact, limit=80):
    bad, steps = [], 0
    for at in range(limit):
        setup()
        _state.update(armed=True, count=0, at=at, fired=False, attack=attack)
        try:
            op()
        except Exception as exc:
            pass  # refusing is fine: what counts is what happened outside
        finally:
            _state["armed"] = False
        if not intact():
            bad.append(at)
        if not _state["fired"]:
            steps = at
            break
    return {"bad": bad, "steps": steps}

def regular(p):
    # What a regular file holds; None for anything else (a FIFO is never opened).
    try:
        return p.read_text() if stat.S_ISREG(os.lstat(p).st_mode) else None
    except OSError:
        return None

def fresh(d):
    if os.path.lexists(d):
        if os.path.islink(d):
            os.unlink(d)
        else:
            shutil.rmtree(d)
    os.makedirs(d)
"""

SET_ASIDE_GIT = r"""
from codemode.sandbox.git import git_sanity
top = Path(sys.argv[1]); ws, out = top / "ws", top / "outside"

def setup():
    fresh(ws); fresh(out)
    os.makedirs(ws / "sub" / ".git" / "hooks")       # the repository a command made
    os.makedirs(out / "sub" / ".git")                # the user's repository elsewhere
    (out / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")

def attack():  # the concurrent command: sub/ becomes a link to the other repository
    os.rename(ws / "sub", ws / "sub.moved")
    os.symlink(out / "sub", ws / "sub")

op = lambda: with_roots(git_sanity.set_aside, ws / "sub" / ".git", "it has hooks", roots=[ws])
intact = lambda: (out / "sub" / ".git" / "HEAD").is_file()
print(json.dumps(attack_at_each_step(setup, op, attack, intact)))
"""

SET_ASIDE_CODEMODE = r"""
from codemode.sandbox.protection import codemode_watch
top = Path(sys.argv[1]); ws, out = top / "ws", top / "outside"

def setup():
    fresh(ws); fresh(out)
    os.makedirs(ws / "sub" / ".codemode")            # made by a command
    os.makedirs(out / "sub" / ".codemode")           # another project's settings
    (out / "sub" / ".codemode" / "config.toml").write_text("x = 1\n")

def attack():
    os.rename(ws / "sub", ws / "sub.moved")
    os.symlink(out / "sub", ws / "sub")

op = lambda: with_roots(codemode_watch.set_aside, [ws / "sub" / ".codemode"], roots=[ws])
intact = lambda: (out / "sub" / ".codemode" / "config.toml").is_file()
print(json.dumps(attack_at_each_step(setup, op, attack, intact)))
"""

RESTORE_HOOKS = r"""
from codemode.sandbox.git import git_guard
top = Path(sys.argv[1]); ws, out = top / "ws", top / "outside"
state = {}

def setup():
    fresh(ws); fresh(out)
    os.makedirs(ws / ".git" / "hooks")
    (ws / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (ws / ".git" / "config").write_text("[core]\n")
    os.makedirs(out / "hooks")
    (out / "hooks" / "pre-commit").write_text("#!/bin/sh\necho the user's own hook\n")
    state["s"] = git_guard.take([ws], full=True)     # Landlock: copies kept
    (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nevil\n")  # the command

def attack():  # while the guard puts hooks/ back, it becomes a link to another hooks/
    os.rename(ws / ".git" / "hooks", ws / ".git" / "hooks.moved")
    os.symlink(out / "hooks", ws / ".git" / "hooks")

op = lambda: git_guard.repair(state["s"])
intact = lambda: (out / "hooks" / "pre-commit").is_file()
print(json.dumps(attack_at_each_step(setup, op, attack, intact)))
"""

RESTORE_OVER_FIFO = r"""
from codemode.sandbox.git import git_guard
top = Path(sys.argv[1]); ws = top / "ws"
fresh(ws)
os.makedirs(ws / ".git" / "hooks")
(ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
s = git_guard.take([ws], full=True)
os.unlink(ws / ".git" / "config")
os.mkfifo(ws / ".git" / "config")                    # the command: a FIFO no one reads

def hung(*_):
    print(json.dumps({"hung": True})); sys.stdout.flush(); os._exit(0)

signal.signal(signal.SIGALRM, hung)
signal.alarm(15)
notes = git_guard.repair(s)
signal.alarm(0)
p = ws / ".git" / "config"
print(json.dumps({"hung": False, "regular": p.is_file() and not p.is_symlink(),
                  "content": p.read_text() if p.is_file() else None, "notes": notes}))
"""

SET_ASIDE_HOME_ENTRY = r"""
from codemode.sandbox.git import git_guard
top = Path(sys.argv[1]); ws, out = top / "ws", top / "outside"

def setup():
    fresh(ws); fresh(out)
    os.makedirs(ws / "home")                         # a root that contains the home
    (ws / "home" / ".profile-extra").write_text("planted\n")   # a command added it
    os.makedirs(out / "home")                        # the same name somewhere else
    (out / "home" / ".profile-extra").write_text("someone's own\n")

def attack():  # the folder holding the home is renamed aside, a link in its place
    os.rename(ws / "home", ws / "home.moved")
    os.symlink(out / "home", ws / "home")

op = lambda: with_roots(git_guard._set_aside_new, ws / "home" / ".profile-extra", roots=[ws])
intact = lambda: (out / "home" / ".profile-extra").is_file()
print(json.dumps(attack_at_each_step(setup, op, attack, intact)))
"""

WRITE_WHILE_PARENT_MOVES = r"""
from codemode.hostfs.writer import Writer
top = Path(sys.argv[1]); ws, out = top / "ws", top / "outside"
landed = []

def setup():
    fresh(ws); fresh(out)
    os.makedirs(ws / "sub"); (ws / "sub" / "f").write_text("old\n")
    os.makedirs(out / "sub"); (out / "sub" / "f").write_text("the user's\n")

def attack():  # the folder being written in is renamed aside, a link put in its place
    os.rename(ws / "sub", ws / "sub.moved")
    os.symlink(out / "sub", ws / "sub")

def op():
    Writer(ws).write("sub/f", b"new\n")

def intact():
    moved = ws / "sub.moved" / "f"
    if moved.exists() and moved.read_text() == "new\n":
        landed.append(1)  # the write went with its folder: still inside the workspace
    kept = (out / "sub" / "f").read_text() == "the user's\n"
    return sorted(os.listdir(out / "sub")) == ["f"] and kept

result = attack_at_each_step(setup, op, attack, intact)
result["landed_in_moved_folder"] = len(landed)
print(json.dumps(result))
"""

READ_WHILE_SWAPPED_FOR_FIFO = r"""
from codemode.sandbox.git import git_guard
top = Path(sys.argv[1]); ws = top / "ws"
state = {}

def setup():
    fresh(ws)
    os.makedirs(ws / ".git" / "hooks")
    (ws / ".git" / "config").write_text("[core]\n")
    state["s"] = git_guard.take([ws], full=True)
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")  # the command

def attack():  # config becomes a FIFO just as the guard looks at it
    os.unlink(ws / ".git" / "config")
    os.mkfifo(ws / ".git" / "config")

def hung(*_):
    print(json.dumps({"hung": True, "at": _state["at"]})); sys.stdout.flush(); os._exit(0)

signal.signal(signal.SIGALRM, hung)
signal.alarm(20)
result = attack_at_each_step(setup, lambda: git_guard.repair(state["s"]), attack,
                             lambda: "evil" not in (regular(ws / ".git" / "config") or ""))
signal.alarm(0)
result["hung"] = False
print(json.dumps(result))
"""


def _run(user: str, script: str, top: Path) -> dict[str, object]:
    if user == "nobody" and (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    source = COMMON + script
    # this checkout's codemode, whatever the environment has installed
    env = {**os.environ, "CODEMODE_HOME": str(top / "home"), "PYTHONPATH": str(REPO)}
    if user == "nobody":
        give(top, user)
        env["PYTHONPATH"] = f"{REPO}:{_site_packages()}"
        env["HOME"] = str(top)
        argv = [*_as_nobody(), SYSTEM_PYTHON, "-c", source, str(top)]
    else:
        argv = [sys.executable, "-c", source, str(top)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


USERS = ["self", "nobody"]


@pytest.mark.parametrize("user", USERS)
def test_setting_a_new_git_aside_never_moves_a_repository_outside(
    user: str, shared_dir: Path
) -> None:
    result = _run(user, SET_ASIDE_GIT, shared_dir)
    assert result["steps"], result  # the attack was made at every step there was
    assert result["bad"] == [], f"the other repository's .git was moved at steps {result}"


@pytest.mark.parametrize("user", USERS)
def test_setting_a_new_codemode_folder_aside_never_moves_one_outside(
    user: str, shared_dir: Path
) -> None:
    result = _run(user, SET_ASIDE_CODEMODE, shared_dir)
    assert result["steps"], result
    assert result["bad"] == [], f"another .codemode/ was moved at steps {result}"


@pytest.mark.parametrize("user", USERS)
def test_putting_hooks_back_never_removes_a_file_outside(user: str, shared_dir: Path) -> None:
    result = _run(user, RESTORE_HOOKS, shared_dir)
    assert result["steps"], result
    assert result["bad"] == [], f"a hook outside the workspace was removed at steps {result}"


@pytest.mark.parametrize("user", USERS)
def test_setting_a_new_home_dot_entry_aside_never_moves_one_outside(
    user: str, shared_dir: Path
) -> None:
    result = _run(user, SET_ASIDE_HOME_ENTRY, shared_dir)
    assert result["steps"], result
    assert result["bad"] == [], f"a dot-entry outside the workspace was moved at steps {result}"


@pytest.mark.parametrize("user", USERS)
def test_a_fifo_planted_where_config_is_put_back_is_replaced_not_opened(
    user: str, shared_dir: Path
) -> None:
    result = _run(user, RESTORE_OVER_FIFO, shared_dir)
    assert result["hung"] is False, "the guard blocked opening the FIFO for writing"
    assert result["regular"] is True, result
    assert result["content"] == "[core]\n\tbare = false\n", result


@pytest.mark.parametrize("user", USERS)
def test_a_folder_renamed_away_mid_write_takes_the_write_with_it_never_outside(
    user: str, shared_dir: Path
) -> None:
    # The window "the parent checked after the fact" would close: the writer holds the
    # folder's descriptor, so a write whose folder a concurrent command renames aside
    # (a link to elsewhere put in its place) lands in that folder, wherever in the
    # workspace it now is. Nothing outside is written at any step; the write is only
    # not at the path the host meant, which the command could have written itself.
    result = _run(user, WRITE_WHILE_PARENT_MOVES, shared_dir)
    assert result["steps"], result
    assert result["bad"] == [], f"a file outside the workspace was written at steps {result}"
    assert result["landed_in_moved_folder"], result  # the window exists; it leads nowhere


@pytest.mark.parametrize("user", USERS)
def test_a_file_swapped_for_a_fifo_while_the_guard_reads_it_does_not_hang_it(
    user: str, shared_dir: Path
) -> None:
    result = _run(user, READ_WHILE_SWAPPED_FOR_FIFO, shared_dir)
    assert result["hung"] is False, f"the guard blocked reading a FIFO: {result}"
    assert result["steps"], result
    # (a FIFO made after the last repair stays: the next command's repair is its)
    assert result["bad"] == [], f"the command's config was left at steps {result}"


def test_writer_at_takes_a_path_from_its_root_and_refuses_one_outside(tmp_path: Path) -> None:
    from codemode.hostfs.writer import Refused, writer_at

    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    (tmp_path / "home-link").symlink_to(ws)  # a home reached through a link
    writer, rel = writer_at(tmp_path / "home-link" / ".x", [ws])
    assert (writer.root, rel) == (ws, ".x")
    writer, rel = writer_at(ws / "a" / "b", [tmp_path.resolve(), ws])
    assert (writer.root, rel) == (ws, "a/b")  # the deepest root
    with pytest.raises(Refused, match="outside the writable roots"):
        writer_at(tmp_path / "elsewhere" / ".git", [ws])
