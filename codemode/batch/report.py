"""The JSON Lines report: one line per repository, written as each one finishes.

Lines are flushed as they come, so an interrupted batch still leaves a report of what
finished. Each line is a ``RepoResult`` (see ``models.py`` for the fields).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from codemode.batch.models import RepoResult


def default_report_path(directory: Path | None = None) -> Path:
    """``codemode-batch-YYYYmmdd-HHMMSS.jsonl`` in ``directory`` (default:
    ``$CODEMODE_HOME/batch``: never the current directory, which is usually one of the
    repositories)."""
    from codemode.config_file import codemode_home

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (directory or codemode_home() / "batch") / f"codemode-batch-{stamp}.jsonl"


class ReportWriter:
    """Appends results to a JSON Lines file; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    def __enter__(self) -> ReportWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        return self

    def write(self, result: RepoResult) -> None:
        assert self._file is not None, "ReportWriter used outside its with block"
        self._file.write(result.report_line() + "\n")
        self._file.flush()

    def discard_if_empty(self) -> None:
        """Close and delete the report if nothing was written (the run never started)."""
        if self._file is not None and self._file.tell() == 0:
            self._file.close()
            self.path.unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()


def read_report(path: Path) -> list[RepoResult]:
    """The results in a report file, in the order written."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [RepoResult.model_validate_json(line) for line in lines if line.strip()]
