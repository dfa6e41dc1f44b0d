"""A batch apply killed (SIGKILL) at every step of a multi-file write: after the next
recovery of the repository, it holds the whole before, with no temporary file; let run
to the end, the whole after. The driver is a forked child that kills itself just before
its Nth filesystem call, for N = 0, 1, 2, ... until it finishes."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.batch.changes import Change, compute
from codemode.tools.store import journal

_CALLS = ("open", "rename", "unlink", "mkdir", "rmdir", "symlink", "fchmod", "write", "replace")


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    state: dict[str, tuple[int, str]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            held = "link:" + os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            held = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            held = "dir"
        state[path.relative_to(root).as_posix()] = (stat.S_IMODE(st.st_mode), held)
    return state


def _make(root: Path, files: dict[str, str | None]) -> None:
    """``None``: a symlink to README.md."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.symlink_to("README.md")
        else:
            path.write_text(text)
    (root / "run.sh").chmod(0o755)


def _journal(tmp: Path) -> tuple[Path, list[Change], dict[str, Any], dict[str, Any]]:
    base, work = tmp / "repo", tmp / "work"
    start: dict[str, str | None] = {
        "README.md": "readme\n", "a.txt": "a\n", "gone.txt": "gone\n", "run.sh": "#!/bin/sh\n",
        "old/deep.txt": "deep\n", "link": None, "to-file": None,
    }  # fmt: skip
    _make(base, start)
    _make(work, start)
    # An empty folder the script removes, and a link to a folder of the repository that
    # the script replaces with a real folder holding a file.
    for root in (base, work):
        (root / "empty").mkdir()
        (root / "real").mkdir()
        (root / "real" / "r.txt").write_text("r\n")
        (root / "via").symlink_to("real")
    (work / "empty").rmdir()
    (work / "via").unlink()
    (work / "via").mkdir()
    (work / "via" / "v.txt").write_text("v\n")
    (work / "a.txt").write_text("A changed\n")
    (work / "gone.txt").unlink()
    (work / "run.sh").write_text("#!/bin/sh\necho new\n")
    (work / "old" / "deep.txt").unlink()
    (work / "old").rmdir()
    (work / "new" / "dir").mkdir(parents=True)
    (work / "new" / "dir" / "f.txt").write_text("new\n")
    (work / "link").unlink()
    (work / "link").symlink_to("a.txt")
    (work / "to-file").unlink()
    (work / "to-file").write_text("a file now\n")
    (work / "made-link").symlink_to("run.sh")
    changes = compute(base, work)
    kinds = {c.kind for c in changes}
    assert kinds == {"file", "symlink", "deleted", "mkdir", "rmdir"}, kinds
    return base, changes, tree_state(base), tree_state(work)


def _die_before_call(n: int) -> None:
    """From now on in this (child) process, SIGKILL itself at its ``n``th call of a
    filesystem function of ``os``."""
    count = [0]

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if count[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            count[0] += 1
            return real(*args, **kwargs)

        return counted

    for name in _CALLS:
        setattr(os, name, wrap(getattr(os, name)))


def test_a_kill_at_every_step_leaves_the_whole_before_or_the_whole_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.batch.applying import apply

    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    killed = 0
    for n in range(500):
        tmp = tmp_path / str(n)
        tmp.mkdir()
        repo, changes, before, after = _journal(tmp)
        pid = os.fork()
        if pid == 0:  # the driver
            try:
                _die_before_call(n)
                apply(repo, changes)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            killed += 1
            journal.recover(repo)  # what the next entry point in the repository does
            assert tree_state(repo) == before, f"killed before call {n}"
            continue
        assert os.WEXITSTATUS(status) == 0
        assert tree_state(repo) == after, f"finished after {n} calls"
        assert not list((tmp_path / "home" / "journal").iterdir())
        break
    else:
        pytest.fail("the apply never finished")
    assert killed > 20, killed  # the kills did land at many steps
