"""The walk that finds ``.codemode`` folders a command made below a root
(``codemode_watch``) runs in codemode's own process after every command, over a tree
the command shaped: its cost must grow with the number of folders, not with their
depth times their number (a 1500-deep chain once cost a million ``lstat`` calls, 35 s
after each command), and it must still find what lies at the bottom."""

from __future__ import annotations

import os
import time
from pathlib import Path

from codemode.sandbox.protection.codemode_watch import CodemodeWatch

DEPTH = 1500


def _chain(top: Path, depth: int) -> Path:
    """``depth`` folders, each inside the last (made by descriptor: the path would
    outgrow what the kernel resolves at once); returns the path of the deepest."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.mkdir(".codemode", dir_fd=fd)
    os.close(fd)
    return top.joinpath(*(["d"] * depth))


def _walk_time(root: Path) -> tuple[float, CodemodeWatch]:
    started = time.process_time()
    watch = CodemodeWatch([root])
    return time.process_time() - started, watch


def test_a_deep_tree_costs_about_what_a_flat_one_of_as_many_folders_costs(
    tmp_path: Path,
) -> None:
    deep_root, flat_root = tmp_path / "deep", tmp_path / "flat"
    deep_root.mkdir()
    flat_root.mkdir()
    bottom = _chain(deep_root, DEPTH)
    for i in range(DEPTH):
        (flat_root / f"d{i}").mkdir()
    (flat_root / f"d{DEPTH - 1}" / ".codemode").mkdir()
    deep = min(_walk_time(deep_root)[0] for _ in range(3))
    flat = min(_walk_time(flat_root)[0] for _ in range(3))
    _, watch = _walk_time(deep_root)
    assert bottom / ".codemode" in watch.existing  # found at the bottom
    watch.close()
    # (quadratic, it was ~300x: 1500 lstat calls per folder)
    assert deep <= 10 * max(flat, 0.01), (deep, flat)


def test_a_folder_above_swapped_for_a_link_out_of_the_root_is_not_walked(
    tmp_path: Path,
) -> None:
    """The walk keeps only the folder its parent's listing showed: once ``a/`` is listed
    (``b`` found in it), ``a`` is replaced by a symlink to a tree outside holding a
    ``b/.codemode`` of its own; ``a/b`` now leads there, and is skipped."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (outside / "b" / ".codemode").mkdir(parents=True)
    watch = CodemodeWatch.__new__(CodemodeWatch)
    watch.roots, watch.git, watch.new_git, watch._wd = [root], set(), set(), {}
    watch.complete, watch._fd = False, -1
    real_scandir = os.scandir
    calls = []

    class Swapping:
        def __init__(self, fd: int) -> None:
            with real_scandir(fd) as listing:
                self.entries = list(listing)
                for e in self.entries:
                    e.stat(follow_symlinks=False)  # (as the walk does, fd still open)
            calls.append(fd)
            if len(calls) == 2:  # a/ listed: now swap it
                os.rename(root / "a", tmp_path / "a-moved")
                os.symlink(outside, root / "a")

        def __enter__(self) -> list[os.DirEntry[str]]:
            return self.entries

        def __exit__(self, *exc: object) -> None:
            pass

    os.scandir = Swapping  # type: ignore[assignment,misc]
    try:
        found = list(watch._walk(root, watch=False))
    finally:
        os.scandir = real_scandir
    assert len(calls) == 2, calls  # root and a/, never outside/b
    assert found == [], found
