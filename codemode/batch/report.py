"""The JSON Lines report: a line describing the run, then one line per repository.

The first line (``RunHeader``, ``"kind": "run"``) says what ran: codemode's version, the
script's SHA-256, its arguments, the repositories selected, the filters, the backend
and the start time. A resumed run appends a new header and its own lines to the same
file. Repository lines (``RepoResult``, see ``models.py``) are flushed as they come, so
an interrupted batch still leaves a report of what finished; each is bounded (output,
value, error and diff capped, head and tail kept) and always valid JSON.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, Field, ValidationError

from codemode.batch.models import RepoResult


class ReportUnwritable(OSError):
    """The report file cannot be opened for writing (the message says why)."""


class RunHeader(BaseModel):
    """The report's first line: what this run was."""

    kind: str = "run"
    version: str
    script: str = Field(description="The script's path as given ('-': stdin).")
    script_sha256: str
    arguments: list[str] = Field(description="The script's argv.")
    repos: list[str] = Field(description="The --repos arguments as given.")
    repositories: list[str] = Field(description="The repositories selected to run.")
    skipped: int = Field(default=0, description="Arguments that named no repository.")
    filters: dict[str, Any] = Field(default_factory=dict)
    dropped: dict[str, int] = Field(default_factory=dict, description="Dropped per filter.")
    backend: str
    jobs: int
    dry_run: bool = False
    publish: dict[str, Any] | None = None
    resumed_from: str | None = None
    run_id: str | None = Field(
        default=None,
        description="The run's id; what it selected is recorded under it (run_record.py).",
    )
    started_at: str


class ReportError(ValueError):
    """A report that cannot be read back (for --resume); the message says why."""


def default_report_path(directory: Path | None = None) -> Path:
    """``codemode-batch-YYYYmmdd-HHMMSS.jsonl`` in ``directory`` (default:
    ``$CODEMODE_HOME/batch``: never the current directory, which is usually one of the
    repositories)."""
    from codemode.locations.config_file import codemode_home

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (directory or codemode_home() / "batch") / f"codemode-batch-{stamp}.jsonl"


class ReportWriter:
    """Appends results to a JSON Lines file; use as a context manager."""

    def __init__(self, path: Path, header: RunHeader | None = None, append: bool = False) -> None:
        self.path = path
        self.header = header
        self.append = append
        self.written = 0
        self._file: TextIO | None = None
        self._start = 0

    def __enter__(self) -> ReportWriter:
        # A symlink at the report's name is refused, not written through: the report may
        # sit where a script's changes were applied (inside a repository of the run).
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        flags |= os.O_APPEND if self.append else os.O_TRUNC
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            why = "it is a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
            raise ReportUnwritable(f"cannot write the report {self.path}: {why}") from None
        self._file = os.fdopen(fd, "a" if self.append else "w", encoding="utf-8")
        self._start = self._file.tell()
        if self.header is not None:
            self._file.write(self.header.model_dump_json(exclude_none=True) + "\n")
            self._file.flush()
        return self

    def write(self, result: RepoResult) -> None:
        assert self._file is not None, "ReportWriter used outside its with block"
        self._file.write(result.report_line() + "\n")
        self._file.flush()
        self.written += 1

    def discard_if_empty(self) -> None:
        """Take back what this run wrote if no repository was reported (the run never
        started): a new file is deleted, an appended one cut back."""
        if self._file is None or self.written:
            return
        self._file.flush()
        if self.append and self._start:
            os.ftruncate(self._file.fileno(), self._start)  # on its own descriptor
        else:
            self.path.unlink(missing_ok=True)
        self._file.close()
        self._file = None

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()


def read_report(path: Path) -> tuple[list[RunHeader], list[RepoResult]]:
    """The run headers and the repository results in a report file, in order. A
    symlink at ``path`` is refused, as writing the report refuses one: a report is read
    where its run wrote it, and only a regular file (a FIFO would block)."""
    read_only = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, read_only)
    except OSError as exc:
        why = "it is a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise ReportError(f"cannot read the report {path}: {why}") from None
    try:
        with os.fdopen(fd, "rb") as source:
            if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                raise ReportError(f"cannot read the report {path}: not a regular file")
            text = source.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"cannot read the report {path}: {exc}") from None
    headers: list[RunHeader] = []
    results: list[RepoResult] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if isinstance(data, dict) and data.get("kind") == "run":
                headers.append(RunHeader.model_validate(data))
            else:
                results.append(RepoResult.model_validate(data))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise ReportError(f"{path}:{number}: not a batch report line ({first})") from None
    return headers, results
