"""Red team: codemode's own (unconfined) process walking or reading a tree that a
confined program shaped. Each test builds the tree on disk as a command could (depth
with ``os.mkdir(dir_fd=...)``, as ``mkdir -p`` does), then runs the host-side code on
it: no RecursionError, no hang on a FIFO, no memory for a sparse file's size, and a cost
that grows with the number of entries, not with depth times number (timings are ratios
against a flat tree of as many entries, so they hold on a busy machine)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

DEPTH = 1500  # past Python's recursion limit (1000), short of PATH_MAX with 1-char names


@pytest.fixture(autouse=True)
def _clean_deep(tmp_path: Path) -> object:
    """pytest's own clean-up of old temporary folders is Python 3.11's recursive
    ``rmtree``: a tree this deep left behind would fail a later session's start."""
    yield
    subprocess.run(["chmod", "-R", "u+rwx", str(tmp_path)], capture_output=True)
    subprocess.run(["rm", "-rf", "--", str(tmp_path)], capture_output=True)


def _chain(top: Path, depth: int = DEPTH, *, name: str = "d", file: str | None = None) -> Path:
    """``depth`` folders named ``name``, each inside the last (made by descriptor, as
    ``mkdir -p`` does: the path outgrows what one call takes), a file ``file`` in each
    when given; returns the deepest folder's path."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        if file is not None:
            os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    return top.joinpath(*([name] * depth))


def _flat(top: Path, count: int, *, file: str | None = None) -> None:
    """``count`` folders side by side (a file ``file`` in each when given): as many
    entries as ``_chain`` makes, none deep."""
    top.mkdir(exist_ok=True)
    for i in range(count):
        (top / f"d{i}").mkdir()
        if file is not None:
            (top / f"d{i}" / file).write_bytes(b"")


def _cpu(fn: Callable[[], object]) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def _gone(path: Path) -> bool:
    return not os.path.lexists(path)


# --- git_guard: what a command made where an absent protected entry must stay absent ----


def _repo(root: Path) -> None:
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")


def test_git_guard_removes_a_deep_tree_planted_as_commondir(tmp_path: Path) -> None:
    """bubblewrap cannot hold a place for an absent ``commondir``: the command makes it
    a folder 1500 deep. The guard's repair copies what is there now (recursively) and
    removes it (``shutil.rmtree``, recursive in 3.11): neither may raise RecursionError."""
    from codemode.sandbox.git import git_guard

    root = tmp_path / "ws"
    root.mkdir()
    _repo(root)
    state = git_guard.take([root], full=False)
    planted = root / ".git" / "commondir"
    planted.mkdir()
    _chain(planted)
    notes = git_guard.repair(state)
    assert _gone(planted), notes
    assert any("commondir" in n for n in notes), notes


def test_git_guard_landlock_puts_back_a_codemode_folder_made_deep(tmp_path: Path) -> None:
    """Under Landlock the guard copies ``.codemode/`` and puts it back: a command that
    grows a 1500-deep chain inside it must not crash the repair."""
    from codemode.sandbox.git import git_guard

    root = tmp_path / "ws"
    root.mkdir()
    _repo(root)
    (root / ".codemode").mkdir()
    (root / ".codemode" / "rules").write_text("keep\n")
    state = git_guard.take([root], full=True)
    _chain(root / ".codemode")
    git_guard.repair(state)
    assert sorted(os.listdir(root / ".codemode")) == ["rules"]


def test_git_guard_copy_of_a_deep_hooks_tree_is_linear(tmp_path: Path) -> None:
    """Copying a protected folder (Landlock: ``hooks/``) costs what its entries cost,
    not the square of its depth (a path per level re-walks every folder above)."""
    from codemode.sandbox.git import git_guard

    deep, flat = tmp_path / "deep", tmp_path / "flat"
    deep.mkdir()
    _chain(deep, file="f")
    _flat(flat, DEPTH, file="f")
    t_deep = min(_cpu(lambda: git_guard._copy(deep, [1 << 30])) for _ in range(2))
    t_flat = min(_cpu(lambda: git_guard._copy(flat, [1 << 30])) for _ in range(2))
    assert t_deep <= 10 * max(t_flat, 0.02), (t_deep, t_flat)


# --- the host-side writer's removal -----------------------------------------------------


def test_writer_remove_tree_of_a_deep_folder(tmp_path: Path) -> None:
    from codemode.hostfs.writer import Writer

    (tmp_path / "x").mkdir()
    _chain(tmp_path / "x")
    Writer(tmp_path).remove_tree("x")
    assert _gone(tmp_path / "x")


# --- gitfile and commondir pointers: read whole, by path --------------------------------


def _in_child(
    code: str, limit_mb: int = 600, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``code`` run in a Python with its address space capped at ``limit_mb``."""
    prelude = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit_mb << 20}, {limit_mb << 20}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _sparse(path: Path, head: bytes, size: int) -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def test_a_sparse_gitfile_is_not_read_whole(tmp_path: Path) -> None:
    """``truncate -s 4G sub/.git`` (a sparse file: no disk) after ``gitdir: x``: the
    check of a new repository reads the pointer; it must not hold 4 GiB for it."""
    gitfile = tmp_path / ".git"
    _sparse(gitfile, b"gitdir: elsewhere\n", 4 << 30)
    code = (
        "from pathlib import Path\n"
        "from codemode.sandbox.protection.protected import gitfile_target\n"
        f"print(gitfile_target(Path({str(gitfile)!r})))\n"
    )
    done = _in_child(code)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_sparse_commondir_is_not_read_whole(tmp_path: Path) -> None:
    from codemode.sandbox.protection.protected import git_dirs

    root = tmp_path / "ws"
    _repo(root)
    _sparse(root / ".git" / "commondir", b"../other\n", 4 << 30)
    code = (
        "from pathlib import Path\n"
        "from codemode.sandbox.protection.protected import git_dirs\n"
        f"print(list(git_dirs(Path({str(root)!r}))))\n"
    )
    done = _in_child(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert root / ".git" in list(git_dirs(root))


def _returns_soon(fn: Callable[[], object], fifo: Path, seconds: float = 10) -> object:
    """``fn()``'s value, failing (and unblocking it by opening the FIFO's other end)
    if it has not returned within ``seconds``."""
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail(f"blocked on the FIFO {fifo}")
    return box[0] if box else None


def test_a_gitfile_swapped_for_a_fifo_does_not_block(tmp_path: Path) -> None:
    """The check looks (``is_file``) and then reads: a command running beside it can
    put a FIFO there in between. The read must not wait for a writer."""
    from codemode.sandbox.protection.protected import gitfile_target

    fifo = tmp_path / ".git"
    os.mkfifo(fifo)
    assert _returns_soon(lambda: gitfile_target(fifo), fifo) is None


# --- /undo's snapshots: a walk and a read of every file, every turn -----------------------


def test_snapshots_of_a_deep_tree_cost_about_what_a_flat_one_costs(tmp_path: Path) -> None:
    """A command makes a chain 1500 deep with a file in every folder: the next turn's
    snapshot reads each file once, at a cost that must not grow with its depth (a walk
    from ``/`` down to each file costs 1500 opens per file)."""
    from codemode.tui.snapshots import Snapshots

    deep, flat = tmp_path / "deep", tmp_path / "flat"
    deep.mkdir()
    _chain(deep, file="f")
    _flat(flat, DEPTH, file="f")

    def prepare(root: Path) -> float:
        snaps = Snapshots(root, store=tmp_path / f"store-{root.name}")
        (tmp_path / f"store-{root.name}").mkdir(exist_ok=True)
        try:
            spent = _cpu(snaps.prepare)
            assert snaps.disabled is None and len(snaps._last) == DEPTH, len(snaps._last)
            return spent
        finally:
            snaps.close()

    t_deep = min(prepare(deep) for _ in range(2))
    t_flat = min(prepare(flat) for _ in range(2))
    assert t_deep <= 10 * max(t_flat, 0.05), (t_deep, t_flat)


# --- batch: the copy a script runs in -----------------------------------------------------


def test_a_deep_repository_is_copied_without_recursion_error(tmp_path: Path) -> None:
    """An earlier session's command left a chain 1500 deep in the repository: the copy
    for a batch script must not end in RecursionError (a failure to copy is an OSError
    the batch reports for that repository)."""
    from codemode.batch.workcopy import make_copy

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    _chain(repo, file="f")
    dest = tmp_path / "copy"
    make_copy(repo, dest)
    assert (dest / "a.txt").read_text() == "a\n"
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.stat("/".join(["d"] * DEPTH), dir_fd=fd)  # the bottom is there
    finally:
        os.close(fd)


def test_a_deep_repository_copy_costs_about_what_a_flat_one_costs(tmp_path: Path) -> None:
    from codemode.batch.workcopy import make_copy

    deep, flat = tmp_path / "deep", tmp_path / "flat"
    deep.mkdir()
    _chain(deep, file="f")
    _flat(flat, DEPTH, file="f")
    t_deep = _cpu(lambda: make_copy(deep, tmp_path / "c-deep"))
    t_flat = _cpu(lambda: make_copy(flat, tmp_path / "c-flat"))
    assert t_deep <= 10 * max(t_flat, 0.05), (t_deep, t_flat)


# --- skills: helpers found by a walk of the repository's .agents/skills -------------------


def test_a_deep_skill_folder_does_not_crash_discovery(tmp_path: Path) -> None:
    """``.agents/skills`` lies in the workspace, which commands write: a chain 1500
    deep planted in a skill folder is walked at the next session's start (``os.walk``
    recurses once per level in Python 3.11)."""
    from codemode.skills.discovery import find_helpers

    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "top.js").write_text("1\n")
    _chain(skill)
    assert find_helpers(skill) == {"top": skill / "top.js"}


# --- dry runs: the searches' overlay of what the run wrote --------------------------------


def test_an_overlaid_walk_of_a_deep_tree_is_linear(tmp_path: Path) -> None:
    """In a dry run the searches look up each walked file in the run's overlay by its
    resolved path: ``Path.resolve`` per file is one lstat per component, so a deep tree
    costs the square of its depth."""
    from codemode.tools.ignore import walk_files
    from codemode.tools.overlaid_walk import walked

    deep, flat = tmp_path / "deep", tmp_path / "flat"
    deep.mkdir()
    _chain(deep, file="f")
    _flat(flat, DEPTH, file="f")

    def walk(root: Path) -> float:
        overlay = {root.resolve() / "new.txt": b"x"}
        got: list[str] = []
        spent = _cpu(lambda: got.extend(walked(root, walk_files(root), overlay)))
        assert len(got) == DEPTH + 1 and "new.txt" in got, len(got)
        return spent

    t_deep = min(walk(deep) for _ in range(2))
    t_flat = min(walk(flat) for _ in range(2))
    assert t_deep <= 10 * max(t_flat, 0.05), (t_deep, t_flat)
