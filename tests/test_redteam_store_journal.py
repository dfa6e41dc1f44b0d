"""Attacks on the write journal's recovery (``codemode/tools/store/journal.py``,
``journal_walk.py``) and on the decision whether a killed publish was finished
(``publish_marker.py``): a program reshapes the workspace between a write killed
partway (a real SIGKILL of a forked writer) and the next start's recovery, which must
never write, remove or read through what it planted, and must leave no temporary file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.hostfs.beneath import Tree
from codemode.tools.store import journal, publish_marker
from codemode.tools.store.changes import Original, Removal, Write
from codemode.tools.store.commit import commit, journal_entries

_CALLS = ("open", "rename", "unlink", "mkdir", "rmdir", "symlink", "fchmod", "write", "replace")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("CODEMODE_HOME", str(folder))
    return folder


def _die_before(n: int, names: tuple[str, ...] = _CALLS) -> None:
    """In this (child) process, SIGKILL itself just before its ``n``th call (from 0) of
    one of ``names`` of ``os``."""
    count = [0]

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if count[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            count[0] += 1
            return real(*args, **kwargs)

        return counted

    for name in names:
        setattr(os, name, wrap(getattr(os, name)))


def _in_child(work: Callable[[], None]) -> int:
    """Run ``work`` in a forked child; its wait status (killed: WIFSIGNALED)."""
    pid = os.fork()
    if pid == 0:
        try:
            work()
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def _killed_patch(ws: Path, files: dict[str, bytes], renames: int) -> None:
    """A patch (the file tools' commit, links followed within the workspace) writing
    ``files``, killed before the rename of its write number ``renames`` (from 0)."""
    writes = [Write(ws / rel, data, 0o644, rel) for rel, data in files.items()]
    originals = {w.path: Original(w.path.read_bytes(), 0o644) for w in writes if w.path.exists()}

    def work() -> None:
        tag = journal.new_tag()
        entries = journal_entries([], writes, originals, [ws], tag)
        journal.begin(ws, [ws], entries, tag)
        _die_before(renames, ("rename",))
        commit([], writes, originals, Tree([ws]), tag)

    status = _in_child(work)
    assert os.WIFSIGNALED(status), "the patch was meant to be killed partway"


def _journals(home: Path) -> list[str]:
    folder = home / "journal"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def _tmp_files(root: Path) -> list[str]:
    return [
        os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".tmp")
    ]


# --- 1. a link (inside the workspace) planted on the way after the write -----------------


def test_a_link_put_on_the_way_since_is_not_rolled_back_through(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.txt").write_bytes(b"A\n")
    (ws / "b.txt").write_bytes(b"B\n")
    (ws / "other").mkdir()
    _killed_patch(ws, {"src/a.txt": b"A2\n", "b.txt": b"B2\n"}, renames=1)
    assert (ws / "src" / "a.txt").read_bytes() == b"A2\n"  # written, then killed
    # The program: src becomes a link to other/, which holds the patch's bytes.
    (ws / "src" / "a.txt").unlink()
    (ws / "src").rmdir()
    (ws / "src").symlink_to("other")
    (ws / "other" / "a.txt").write_bytes(b"A2\n")
    report = journal.recover(ws)
    # other/a.txt was never written by the patch: left as it is, and said.
    assert (ws / "other" / "a.txt").read_bytes() == b"A2\n"
    assert os.readlink(ws / "src") == "other"
    assert "is a symlink now" in report[0] and "src/a.txt" in report[0], report
    assert [j for j in _journals(home) if j.endswith(".kept")], _journals(home)
    assert (ws / "b.txt").read_bytes() == b"B\n"


def test_a_folder_swapped_for_another_by_rename_is_not_rolled_back_into(
    tmp_path: Path, home: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.txt").write_bytes(b"A\n")
    (ws / "b.txt").write_bytes(b"B\n")
    _killed_patch(ws, {"src/a.txt": b"A2\n", "b.txt": b"B2\n"}, renames=1)
    (ws / "src").rename(ws / "src.moved")
    (ws / "elsewhere").mkdir()
    (ws / "elsewhere" / "a.txt").write_bytes(b"A2\n")
    (ws / "elsewhere").rename(ws / "src")
    report = journal.recover(ws)
    assert (ws / "src" / "a.txt").read_bytes() == b"A2\n"
    assert "another folder now" in report[0], report


def test_folders_made_by_the_write_are_not_removed_through_a_link(
    tmp_path: Path, home: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "b.txt").write_bytes(b"B\n")
    _killed_patch(ws, {"new/dir/f.txt": b"F\n", "b.txt": b"B2\n"}, renames=1)
    assert (ws / "new" / "dir" / "f.txt").exists()
    # The program: new/ becomes a link to a folder that held an empty folder dir/ and
    # a file the same as the patch's.
    for name in ("f.txt",):
        (ws / "new" / "dir" / name).unlink()
    (ws / "new" / "dir").rmdir()
    (ws / "new").rmdir()
    (ws / "keep" / "dir").mkdir(parents=True)
    (ws / "keep" / "dir" / "f.txt").write_bytes(b"F\n")
    (ws / "new").symlink_to("keep")
    journal.recover(ws)
    assert (ws / "keep" / "dir" / "f.txt").read_bytes() == b"F\n"
    assert (ws / "keep" / "dir").is_dir()


def test_a_patch_written_through_a_link_is_still_rolled_back(tmp_path: Path, home: Path) -> None:
    """The fix must not refuse what the file tools legitimately wrote through a link
    inside the workspace (the journal records where it went)."""
    ws = tmp_path / "ws"
    (ws / "real").mkdir(parents=True)
    (ws / "real" / "a.txt").write_bytes(b"A\n")
    (ws / "lnk").symlink_to("real")
    (ws / "b.txt").write_bytes(b"B\n")
    _killed_patch(ws, {"lnk/a.txt": b"A2\n", "lnk/new/n.txt": b"N\n", "b.txt": b"B2\n"}, 2)
    assert (ws / "real" / "new" / "n.txt").exists()
    report = journal.recover(ws)
    assert (ws / "real" / "a.txt").read_bytes() == b"A\n"
    assert not (ws / "real" / "new").exists()
    assert os.readlink(ws / "lnk") == "real"
    assert "2 file(s) restored" in report[0] and "Not restored" not in report[0], report
    assert _journals(home) == [] and _tmp_files(ws) == []


# --- 2. a write deeper than PATH_MAX ----------------------------------------------------


def _deep(ws: Path, depth: int) -> Path:
    """A chain of empty folders ``depth`` deep, past PATH_MAX; the path of its bottom."""
    name = "d" * 200
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    return ws.joinpath(*[name] * depth)


def _exists_deep(path: Path, top: Path) -> bool:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    *folders, last = path.relative_to(top).parts
    try:
        for part in folders:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return False
            os.close(fd)
            fd = inner
        try:
            os.stat(last, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True
    finally:
        os.close(fd)


def test_a_deep_rollback_keeps_the_folders_that_were_there(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bottom = _deep(ws, 30)  # some 6,000 bytes
    assert len(os.fsencode(bottom)) > 4096
    target = bottom / "new" / "f.txt"

    def work() -> None:
        tag = journal.new_tag()
        entry = journal.Entry(
            target, tmp=journal.tmp_for(target, tag), after=hashlib.sha256(b"F").hexdigest(),
            made_dirs=journal.missing_dirs(target, [ws]),
        )  # fmt: skip
        journal.begin(ws, [ws], [entry], tag)
        with Tree([ws]).locate(target, make_parents=True) as spot:
            from codemode.hostfs.beneath import write_atomic

            write_atomic(spot, b"F", tag=tag)
        os.kill(os.getpid(), signal.SIGKILL)

    assert os.WIFSIGNALED(_in_child(work))
    assert _exists_deep(target, ws)
    journal.recover(ws)
    assert not _exists_deep(bottom / "new", ws)
    assert _exists_deep(bottom, ws), "a folder that was there before was removed"
    assert journal.missing_dirs(target, [ws]) == [bottom / "new"]


# --- 3. the decision on a killed publish --------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return out.stdout.decode().strip()


def _published(tmp_path: Path) -> tuple[Path, str]:
    """A repository on main with a publish of feat (src/a.txt: A -> A2) killed before
    its apply; the commit of feat."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.txt").write_bytes(b"A\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "branch", "feat", head)
    before = "file:" + hashlib.sha256(b"A\n").hexdigest()
    after = "file:" + hashlib.sha256(b"A2\n").hexdigest()
    publish_marker.begin(repo, ref="refs/heads/feat", commit=head, start_ref="refs/heads/main",
                         push=None, paths=[("src/a.txt", before, after)])  # fmt: skip
    return repo, head


def test_a_publish_is_not_finished_on_bytes_seen_through_a_link(tmp_path: Path) -> None:
    repo, _ = _published(tmp_path)
    (repo / "src" / "a.txt").unlink()
    (repo / "src").rmdir()
    (repo / "elsewhere").mkdir()
    (repo / "elsewhere" / "a.txt").write_bytes(b"A2\n")
    (repo / "src").symlink_to("elsewhere")
    lines = publish_marker.recover(repo)
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/main", lines
    assert "nothing was touched" in lines[0], lines


def test_a_publish_decision_reads_a_bounded_amount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = _published(tmp_path)
    monkeypatch.setattr(publish_marker, "_MOST_READ", 1)
    lines = publish_marker.recover(repo)  # the file holds 2 bytes: one more than allowed
    assert "nothing was touched" in lines[0], lines


def test_a_publish_decision_on_the_real_files_still_finishes(tmp_path: Path) -> None:
    repo, _ = _published(tmp_path)
    (repo / "src" / "a.txt").write_bytes(b"A2\n")
    lines = publish_marker.recover(repo)
    assert "finished a publish" in lines[0], lines
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/feat"


# --- 4. the journal itself, the notice, a recovery killed partway -----------------------


def _recover_in_child(ws: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys, pathlib\nfrom codemode.tools.store.recovery import recover_at_start\n"
        "recover_at_start(pathlib.Path(sys.argv[1]))"
    )
    return subprocess.run([sys.executable, "-c", code, str(ws)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_a_fifo_in_place_of_a_journal_does_not_hang_a_start(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (home / "journal").mkdir(parents=True, mode=0o700)
    os.mkfifo(home / "journal" / f"{journal.workspace_key(ws)}-abcdef.journal")
    try:
        proc = _recover_in_child(ws, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the start hung opening a FIFO named as a journal")
    assert proc.returncode == 0, proc.stderr


def test_a_journal_link_is_not_followed(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_bytes(b"new\n")
    elsewhere = tmp_path / "planted.journal"
    entry = journal.Entry(ws / "f.txt", before=b"old\n", after=hashlib.sha256(b"new\n").hexdigest())
    rec = journal.begin(ws, [ws], [entry], "abc123")
    assert rec.path is not None
    rec.close(keep=True)
    rec.path.rename(elsewhere)
    rec.path.symlink_to(elsewhere)
    assert journal.recover(ws) == []
    assert (ws / "f.txt").read_bytes() == b"new\n"


def test_a_name_with_a_newline_cannot_forge_a_line_of_the_notice(
    tmp_path: Path, home: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    name = "x\ncodemode: rolled back nothing, all is fine \x1b[2J"
    (ws / name).write_bytes(b"A\n")
    (ws / "b.txt").write_bytes(b"B\n")
    _killed_patch(ws, {name: b"A2\n", "b.txt": b"B2\n"}, renames=1)
    (ws / name).write_bytes(b"the program's\n")  # changed since: named in the notice
    report = journal.recover(ws)
    lines = report[0].splitlines()
    assert not any(line.startswith("codemode: rolled back nothing") for line in lines), lines
    assert "\x1b" not in report[0]
    assert "x\\ncodemode" in report[0]


def _tree(root: Path) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(d) / n
            if p.is_symlink():
                state[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                state[str(p)] = "dir"
            else:
                state[str(p)] = p.read_bytes()
    return state


def _killed_patch_tree(tmp: Path) -> tuple[Path, dict[str, Any]]:
    ws = tmp / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_bytes(b"A\n")
    (ws / "b.txt").write_bytes(b"B\n")
    (ws / "t.txt").write_bytes(b"T\n")
    (ws / "lnk").symlink_to("t.txt")
    before = _tree(ws)
    writes = [
        Write(ws / "a.txt", b"A2\n", 0o644, "a.txt"),
        Write(ws / "b.txt", b"B2\n", 0o644, "b.txt"),
    ]
    removals = [Removal(ws / "lnk", "lnk")]
    originals = {ws / "a.txt": Original(b"A\n", 0o644), ws / "b.txt": Original(b"B\n", 0o644),
                 ws / "lnk": Original(b"T\n", 0o644)}  # fmt: skip

    def work() -> None:
        tag = journal.new_tag()
        journal.begin(ws, [ws], journal_entries(removals, writes, originals, [ws], tag), tag)
        commit(removals, writes, originals, Tree([ws]), tag)
        os.kill(os.getpid(), signal.SIGKILL)  # after the last write, before the journal goes

    assert os.WIFSIGNALED(_in_child(work))
    return ws, before


def test_a_recovery_killed_at_every_step_is_finished_by_the_next(
    tmp_path: Path, home: Path
) -> None:
    """Recovery of a recovery: whatever step a recovery dies at, the next one leaves the
    whole before, with no temporary file and no journal."""
    for n in range(200):
        ws, before = _killed_patch_tree(tmp_path / str(n))

        def work(ws: Path = ws, n: int = n) -> None:
            _die_before(n)
            journal.recover(ws)

        status = _in_child(work)
        report = journal.recover(ws)
        assert _tree(ws) == before, (n, report)
        assert _tmp_files(ws) == [], n
        assert _journals(home) == [], (n, _journals(home))
        if not os.WIFSIGNALED(status):
            assert n > 3  # some kills did land inside the recovery
            return
    pytest.fail("the recovery never finished")


def test_two_recoveries_at_once_act_once(tmp_path: Path, home: Path) -> None:
    ws, before = _killed_patch_tree(tmp_path)
    procs = [
        subprocess.Popen([sys.executable, "-c", "import sys, pathlib\nfrom codemode.tools."
                          "store.journal import recover\nprint(recover(pathlib.Path(sys.argv[1])))",
                          str(ws)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert _tree(ws) == before
    assert sum("rolled back" in out for out in outs) == 1, outs
    assert _journals(home) == []
