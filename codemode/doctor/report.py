"""What ``interpreter doctor`` found: one ``Check`` per line, and how they print."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# todo: not set up yet (nothing is wrong, something is missing); warn and error: broken.
Status = Literal["ok", "info", "todo", "warn", "error"]

@dataclass
class Check:
    section: str
    label: str
    status: Status
    detail: str
    fix: str | None = None


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    def add(
        self, section: str, label: str, status: Status, detail: str, fix: str | None = None
    ) -> None:
        self.checks.append(Check(section, label, status, detail, fix))

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.status in ("warn", "error")]

    @property
    def missing(self) -> list[Check]:
        """What is not set up yet (each with how to set it up)."""
        return [c for c in self.checks if c.status == "todo"]


_MARKS = {"ok": "ok  ", "info": "    ", "todo": "todo", "warn": "warn", "error": "FAIL"}
_TITLES = {"data": "User data", "environment": "Environment",
           "confinement": "Confinement (what each working backend keeps)",
           "providers": "Model provider and keys",
           "local": "Local model servers"}


def render(report: Report) -> str:
    lines: list[str] = []
    section = None
    width = max(len(c.label) for c in report.checks)
    for check in report.checks:
        if check.section != section:
            section = check.section
            lines.append(("" if not lines else "\n") + _TITLES.get(section, section))
        lines.append(f"  {_MARKS[check.status]}  {check.label.ljust(width)}  {check.detail}")
        if check.fix and check.status != "ok":
            lines.append(f"        {' ' * width}  fix: {check.fix}")
    problems, missing = len(report.problems), len(report.missing)
    if problems:
        lines.append(f"\n{problems} problem{'s' if problems != 1 else ''} found")
    elif missing:
        lines.append(f"\nnothing broken; not set up yet: {missing} todo line"
                     f"{'s' if missing != 1 else ''} above")
    else:
        lines.append("\nall good")
    return "\n".join(lines)
