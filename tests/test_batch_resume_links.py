"""``--resume REPORT`` reads the report as writing it does: never through a symlink, and
only a regular file (a FIFO planted at the name would block the run forever)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_batch import INTERPRETER, interp


def _finished_run(tmp_path: Path) -> None:
    repo = tmp_path / "repos" / "r0"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp_path / "s.js").write_text("return repo.name;\n")
    done = interp("run", "s.js", "--repos", "repos", "--report", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_resume_refuses_a_report_reached_through_a_symlink(tmp_path: Path) -> None:
    _finished_run(tmp_path)
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "r.jsonl")
    done = interp("run", "s.js", "--resume", "link.jsonl", cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "link.jsonl: it is a symlink" in done.stderr
    assert "Traceback" not in done.stderr
    # The report itself is untouched and still resumes.
    again = interp("run", "s.js", "--resume", "r.jsonl", cwd=tmp_path)
    assert again.returncode == 0 and "no repository left to finish" in again.stderr


def test_resume_refuses_a_fifo_instead_of_waiting_on_it(tmp_path: Path) -> None:
    _finished_run(tmp_path)
    os.mkfifo(tmp_path / "fifo.jsonl")
    try:
        done = subprocess.run(
            [str(INTERPRETER), "run", "s.js", "--resume", "fifo.jsonl"],
            cwd=tmp_path, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError("--resume blocked reading a FIFO") from None
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "fifo.jsonl: not a regular file" in done.stderr
