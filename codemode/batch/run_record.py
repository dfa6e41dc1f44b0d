"""What a batch run selected, kept where no script can write, so that ``--resume`` runs
only that.

A report is an ordinary file wherever ``--report`` put it, possibly inside one of the
repositories it covers, where the driver applies each script's changes: a script could
rewrite the report's run header and list folders it made. So each new run gets a random
``run_id`` (in its header) and a record of its selection in
``$CODEMODE_HOME/batch/runs/RUN_ID.json`` (a confined command never writes codemode's
home); ``--resume`` takes the repositories from the record and refuses a report whose
first header no longer matches it, that names no record, or that is not the file the
record's run wrote (another run's header copied in).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

from codemode.batch.report import ReportError, RunHeader
from codemode.locations.config_file import codemode_home

_RUN_ID = re.compile(r"[0-9a-f]{32}")


def runs_dir() -> Path:
    return codemode_home() / "batch" / "runs"


def new_run_id() -> str:
    return secrets.token_hex(16)


def record_selection(header: RunHeader, report: Path) -> None:
    """Keep ``header``'s selection, and the report it goes to, under its ``run_id``
    (set by the caller)."""
    assert header.run_id is not None and _RUN_ID.fullmatch(header.run_id)
    folder = runs_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = {
        "repositories": header.repositories,
        "script_sha256": header.script_sha256,
        "report": os.path.realpath(report),
    }
    fd = os.open(
        folder / f"{header.run_id}.json",
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out)


def recorded_selection(report: Path, header: RunHeader) -> list[str]:
    """The repositories the run that wrote ``report`` selected, as recorded when it
    started; ReportError when there is no record or the header differs from it."""
    run_id = header.run_id
    advice = (
        "--resume runs only what a run this user started selected, as codemode recorded it "
        f"in {runs_dir()}"
    )
    if run_id is None or not _RUN_ID.fullmatch(run_id):
        raise ReportError(f"{report}: its run header has no run id codemode recorded; {advice}")
    try:
        with open(runs_dir() / f"{run_id}.json", encoding="utf-8") as source:
            data = json.load(source)
        repositories = [str(r) for r in data["repositories"]]
        script = str(data["script_sha256"])
        written_to = str(data["report"])
    except FileNotFoundError:
        raise ReportError(
            f"{report}: no record of the run its run header names (run id {run_id}); {advice}"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"cannot read the record of run {run_id}: {exc}") from None
    if written_to != os.path.realpath(report):
        # Another run's header copied in would otherwise resume that run's selection.
        raise ReportError(
            f"{report}: its run header is that of the run that wrote {written_to}; resume "
            "that report (a report is resumed where its run wrote it)"
        )
    if repositories != header.repositories or script != header.script_sha256:
        raise ReportError(
            f"{report}: its run header was changed since the run wrote it (it lists other "
            "repositories, or another script, than that run selected): nothing is resumed. "
            "A script run in a repository holding the report can rewrite it: keep reports "
            "outside the repositories."
        )
    return repositories
