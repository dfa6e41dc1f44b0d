"""A repository's AGENTS.md is read by codemode's own process at every session start,
before the model is asked anything: one an earlier session's command (or the repository's
author) shaped must not hang the start or take all the memory."""

from __future__ import annotations

import os
from pathlib import Path

from bounded_calls import bounded

from codemode.agent.instructions import project_docs


def _docs(cwd: Path, home: Path, max_chars: int = 1000) -> list[tuple[str, str]]:
    found = bounded(lambda: project_docs(cwd, home, max_chars))
    assert not isinstance(found, BaseException), found
    return found


def test_a_fifo_named_agents_md_does_not_hang_the_start(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    os.mkfifo(tmp_path / "AGENTS.md")
    assert _docs(tmp_path, tmp_path / "home") == []


def test_agents_md_linked_to_dev_zero_is_read_no_further_than_the_cap(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "AGENTS.md").symlink_to("/dev/zero")
    assert _docs(tmp_path, tmp_path / "home") == []  # (a device: not a document)


def test_a_huge_sparse_agents_md_costs_only_the_cap(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    with open(tmp_path / "AGENTS.md", "wb") as f:
        f.write(b"start\n")
        f.truncate(1 << 40)  # a terabyte of holes
    [(label, text)] = _docs(tmp_path, tmp_path / "home", max_chars=100)
    assert label == "AGENTS.md" and text.startswith("start\n") and "cut at 100" in text


def test_agents_md_linked_to_this_processs_environment_is_not_read(tmp_path: Path) -> None:
    """``/proc/self/environ`` is a regular file: read, it would put the session's keys
    in the model's instructions."""
    (tmp_path / "home").mkdir()
    (tmp_path / "AGENTS.md").symlink_to("/proc/self/environ")
    assert _docs(tmp_path, tmp_path / "home") == []
