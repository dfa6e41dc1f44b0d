"""``interpreter run --contains`` reads every repository it selects from, in codemode's
own process, before any script runs: a repository an earlier session's command shaped
(a chain of folders thousands deep, a FIFO where a file was, a link out of it) must
neither crash the selection, nor hang it, nor be followed out of the repository."""

from __future__ import annotations

import os
from pathlib import Path

from bounded_calls import bounded

from codemode.batch.select import Filters, apply_filters


def _chain(top: Path, depth: int) -> int:
    """``depth`` nested folders under ``top``; an open descriptor of the deepest."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    return fd


def _select(repos: list[Path], needle: str) -> list[Path]:
    found = bounded(lambda: apply_filters(repos, Filters(contains=needle))[0])
    assert not isinstance(found, BaseException), found
    return found


def test_a_needle_at_the_bottom_of_a_1500_deep_chain_is_found(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    deep.mkdir()
    fd = _chain(deep, 1500)
    with os.fdopen(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
        f.write("NEEDLE\n")
    os.close(fd)
    assert _select([deep], "NEEDLE") == [deep]


def test_a_fifo_or_a_link_out_neither_hangs_nor_leaks_the_selection(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "secret.txt"
    repo.mkdir()
    outside.write_text("NEEDLE\n")
    os.mkfifo(repo / "a.txt")
    (repo / "b.txt").symlink_to(outside)
    assert _select([repo], "NEEDLE") == []
