"""``--resume REPORT``: run again what did not finish ``ok`` in an earlier report.

The report's first header lists every repository that run selected; the last line
written for each says how it ended (a resumed run appends to the same report, so a
later line wins). Repositories with no line at all (the run was interrupted before
them) and those whose last line is not ``ok`` are run again; with ``--only-failed``,
only those whose last line is ``failed``. The script must be the one the report was
made with: its SHA-256 is compared. The repositories come from the record the run kept
in codemode's home (``run_record.py``), which the header must still match: a script can
rewrite a report kept inside a repository it runs in, never the record.
"""

from __future__ import annotations

from pathlib import Path

from codemode.batch.report import ReportError, RunHeader, read_report
from codemode.batch.run_record import recorded_selection


def to_resume(report: Path, script_sha256: str, only_failed: bool) -> tuple[list[Path], RunHeader]:
    """The repositories to run again, and the report's first header."""
    headers, results = read_report(report)
    if not headers:
        raise ReportError(f"{report} has no run header: it is not a batch report to resume")
    first = headers[0]
    if first.script_sha256 != script_sha256:
        raise ReportError(
            f"{report} was made with another script or prompt (SHA-256 "
            f"{first.script_sha256[:12]}..., this one {script_sha256[:12]}...): resume with "
            "the same one"
        )
    selected = recorded_selection(report, first)
    last = {result.repository: result.status for result in results}
    if only_failed:
        chosen = [r for r in selected if last.get(r) == "failed"]
    else:
        chosen = [r for r in selected if last.get(r) != "ok"]
    return [Path(r) for r in chosen], first
