"""``interpreter doctor``'s exit statuses: all good, not set up yet, or broken.

"Not set up yet" (no model provider configured) is its own status: nothing is wrong,
something is missing, and a script setting up a machine can tell the two apart.
docs/doctor.md documents these values (tests/doc_facts.py reads them from here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from codemode.doctor.report import Report

EXIT_OK = 0
# A check that fails (a FAIL or warn line): something needs fixing.
EXIT_BROKEN = 1
# Nothing fails, but something the agent needs is not set up yet (a todo line). Not 2:
# that is a usage error (an unknown option), as for every command.
EXIT_NOT_SET_UP = 3

Verdict = Literal["ok", "not_set_up", "broken"]


def verdict(report: Report) -> Verdict:
    """Broken wins over not set up: a fix is needed either way, and it is the fix to make."""
    if report.problems:
        return "broken"
    if report.missing:
        return "not_set_up"
    return "ok"


def exit_status(report: Report) -> int:
    return {"ok": EXIT_OK, "not_set_up": EXIT_NOT_SET_UP, "broken": EXIT_BROKEN}[verdict(report)]
