"""The eval's JSON report (every run, written after each one so an interrupted eval
resumes where it stopped), the table it prints, and the recommendation.

A *cell* is one harness in one dialect; each cell runs every task ``repeats`` times.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

REPORT_VERSION = 1


class RunRecord(BaseModel):
    """One task run once in one cell."""

    task: str
    harness: str
    dialect: str  # "code" or "classic"
    repeat: int
    ok: bool
    # Why it failed: the turn's stop reason (max_turns, no_action, context_full,
    # provider_error, answer_rejected, error), "wrong_result" (the turn ended but the
    # task's check refused the workspace) or "crashed" (the run could not start or died).
    error_kind: str | None = None
    error: str | None = None
    model_requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0  # of wall_s, waiting for the model
    cost: float | None = None  # US$, when prices are known

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.task, self.harness, self.dialect, self.repeat)


class EvalReport(BaseModel):
    version: int = REPORT_VERSION
    provider: str
    model: str
    harnesses: list[str]
    dialects: list[str]
    repeats: int
    tasks: list[str]
    runs: list[RunRecord] = Field(default_factory=list)
    # None: every run done; else why it stopped early ("interrupted", "token budget ...").
    stopped: str | None = None
    recommended: dict[str, str] | None = None

    def planned(self) -> int:
        return len(self.tasks) * len(self.harnesses) * len(self.dialects) * self.repeats

    def done(self) -> set[tuple[str, str, str, int]]:
        return {r.key for r in self.runs}

    def tokens(self) -> int:
        return sum(r.input_tokens + r.output_tokens for r in self.runs)

    def cost(self) -> float:
        return sum(r.cost or 0.0 for r in self.runs)


class ReportError(Exception):
    """A report file that cannot be read or resumed; the message says why."""


def load_report(path: Path) -> EvalReport:
    try:
        return EvalReport.model_validate_json(path.read_text("utf-8"))
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise ReportError(f"{path} is not an eval report ({where}: {first['msg']})") from None


def save_report(report: EvalReport, path: Path) -> None:
    """Written whole to a temporary file, then renamed: an interruption leaves the old
    report or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class CellSummary(BaseModel):
    harness: str
    dialect: str
    runs: int
    passed: int
    model_requests: float  # means per run
    input_tokens: float
    output_tokens: float
    wall_s: float  # median per run
    overhead_s: float  # median per run of the time not spent waiting for the model
    errors: dict[str, int]

    @property
    def success(self) -> float:
        return self.passed / self.runs if self.runs else 0.0


def summarize(report: EvalReport) -> list[CellSummary]:
    cells: list[CellSummary] = []
    for harness in report.harnesses:
        for dialect in report.dialects:
            runs = [r for r in report.runs if r.harness == harness and r.dialect == dialect]
            if not runs:
                continue
            cells.append(CellSummary(
                harness=harness, dialect=dialect, runs=len(runs),
                passed=sum(r.ok for r in runs),
                model_requests=statistics.fmean(r.model_requests for r in runs),
                input_tokens=statistics.fmean(r.input_tokens for r in runs),
                output_tokens=statistics.fmean(r.output_tokens for r in runs),
                wall_s=statistics.median(r.wall_s for r in runs),
                overhead_s=statistics.median(max(0.0, r.wall_s - r.model_s) for r in runs),
                errors=dict(Counter(r.error_kind for r in runs if r.error_kind)),
            ))
    return cells


def best(cells: list[CellSummary]) -> CellSummary | None:
    """The cell with the highest success rate; among equals, the fewest tokens, then
    the shortest time. None when nothing succeeded."""
    ranked = sorted(cells, key=lambda c: (-c.success, c.input_tokens + c.output_tokens,
                                          c.wall_s))
    return ranked[0] if ranked and ranked[0].passed else None


def table(report: EvalReport) -> str:
    """The results as a text table, one row per cell, and the recommendation."""
    cells = summarize(report)
    header = ["harness", "dialect", "success", "requests", "prompt tok", "output tok",
              "wall s", "ours s", "errors"]
    rows = [header]
    for c in cells:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(c.errors.items())) or "-"
        rows.append([c.harness, c.dialect, f"{c.passed}/{c.runs} ({c.success:.0%})",
                     f"{c.model_requests:.1f}", f"{c.input_tokens:,.0f}",
                     f"{c.output_tokens:,.0f}", f"{c.wall_s:.1f}", f"{c.overhead_s:.2f}",
                     errors])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("requests, tokens: mean per run; wall s: median per run; ours s: median "
                 "per run of the time not spent waiting for the model (tools, set-up, check)")
    lines.append(recommendation(report, cells))
    return "\n".join(lines)


def recommendation(report: EvalReport, cells: list[CellSummary] | None = None) -> str:
    cells = summarize(report) if cells is None else cells
    winner = best(cells)
    if winner is None:
        return (f"no recommendation: no run succeeded with {report.model} (see the errors; "
                "a larger model or context may be needed)")
    runner_up = [c for c in cells if c is not winner and c.success == winner.success]
    why = "highest success rate"
    if runner_up:
        why += ", fewest tokens among equals"
    partial = " (partial: not every run is done)" if report.stopped else ""
    return (f"recommended for {report.model}: harness {winner.harness}, {winner.dialect} "
            f"dialect ({why}: {winner.success:.0%}){partial}")


def to_json(report: EvalReport) -> str:
    """The report with its per-cell summary, as printed by --json."""
    data = json.loads(report.model_dump_json())
    data["summary"] = [json.loads(c.model_dump_json()) for c in summarize(report)]
    return json.dumps(data, indent=2)
