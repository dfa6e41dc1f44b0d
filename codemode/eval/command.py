"""``interpreter eval``: every task of the suite, in every cell (harness and dialect),
``repeats`` times, against the configured provider and model; the report is written
after each run, so Ctrl-C (or a budget) stops it and ``--resume`` goes on from there."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.eval.report import EvalReport, ReportError, load_report, save_report
from codemode.eval.runner import Cell, Prices, run_task
from codemode.eval.suite import Task, load_tasks

if TYPE_CHECKING:
    from codemode.config import Config

DIALECTS = ("code", "classic")
# Runs in a row that could not get one answer from the model before the eval stops
# (a server that is down, a wrong key): every other run would fail the same way.
PROVIDER_FAILURES = 2
PROVIDER_FAILED = "the model service failed twice in a row"
LIGHT_HARNESS = "minimal"


class EvalError(Exception):
    """Settings the eval cannot run with; the message says what to change."""


@dataclass
class EvalSettings:
    config: Config
    provider: str | None = None
    model: str | None = None
    harnesses: list[str] = field(default_factory=list)  # empty: the defaults
    dialects: list[str] = field(default_factory=lambda: list(DIALECTS))
    repeats: int = 1
    tasks: list[str] = field(default_factory=list)  # empty: all
    report_path: Path | None = None
    resume: bool = False
    max_tokens: int | None = None
    max_cost: float | None = None
    prices: Prices | None = None
    max_turns: int = 50


@dataclass
class Plan:
    provider: str
    model: str
    cells: list[Cell]
    tasks: list[Task]
    report_path: Path
    report: EvalReport


def plan(settings: EvalSettings) -> Plan:
    """What will run, and the report it goes into (a resumed one, or a new one)."""
    from codemode.assembly.model import choose_model, provider_named
    from codemode.assembly.parts import family_harness
    from codemode.config import codemode_home
    from codemode.harnesses.catalog import harness_names

    config = settings.config
    resolved = provider_named(config, settings.provider)
    model = choose_model(config, resolved, settings.model, []).model
    if not model:
        raise EvalError(f"no model chosen for provider {resolved.name}: pass -m MODEL")
    harnesses = settings.harnesses or list(dict.fromkeys([family_harness(resolved),
                                                          LIGHT_HARNESS]))
    unknown = [h for h in harnesses if h not in harness_names()]
    if unknown:
        raise EvalError(f"unknown harness {', '.join(unknown)} (one of "
                        f"{', '.join(harness_names())})")
    bad = [d for d in settings.dialects if d not in DIALECTS]
    if bad or not settings.dialects:
        raise EvalError(f"unknown dialect {', '.join(bad)} (code or classic)")
    if settings.max_cost is not None and settings.prices is None:
        raise EvalError("--max-cost needs the model's prices: the catalog has none; give "
                        "--price-input and --price-output (US$ per million tokens)")
    tasks = load_tasks(settings.tasks or None)
    cells = [Cell(h, d == "code") for h in harnesses for d in settings.dialects]
    path = settings.report_path or (codemode_home() / "eval" /
                                    f"{_slug(resolved.name)}-{_slug(model)}.json")
    fresh = EvalReport(provider=resolved.name, model=model, harnesses=harnesses,
                       dialects=list(settings.dialects), repeats=settings.repeats,
                       tasks=[t.name for t in tasks])
    report = fresh
    if settings.resume:
        if not path.is_file():
            raise EvalError(f"nothing to resume: no report at {path}")
        try:
            report = load_report(path)
        except ReportError as exc:
            raise EvalError(str(exc)) from None
        if (report.provider, report.model) != (fresh.provider, fresh.model):
            raise EvalError(f"{path} is the eval of {report.model} on {report.provider}, "
                            f"not {model} on {resolved.name}; pass --report FILE")
        # The resumed report's plan wins (its tasks, cells and repeats), so that its
        # figures stay comparable.
        tasks = load_tasks(report.tasks)
        cells = [Cell(h, d == "code") for h in report.harnesses for d in report.dialects]
        report.stopped = None
    return Plan(resolved.name, model, cells, tasks, path, report)


async def run_plan(
    settings: EvalSettings, the_plan: Plan, say: Callable[[str], None]
) -> EvalReport:
    """Run what the report does not have yet; saves it after every run."""
    report = the_plan.report
    done = report.done()
    todo = [(task, cell, repeat) for repeat in range(1, report.repeats + 1)
            for task in the_plan.tasks for cell in the_plan.cells
            if (task.name, cell.harness, cell.dialect, repeat) not in done]
    total = report.planned()
    if done:
        say(f"resuming: {len(done)} of {total} runs already in {the_plan.report_path}")
    unreachable = 0  # runs in a row whose first model request failed
    for task, cell, repeat in todo:
        stop = _over_budget(settings, report)
        if stop:
            report.stopped = stop
            break
        try:
            record = await run_task(task, cell, repeat, config=settings.config,
                                    provider=the_plan.provider, model=the_plan.model,
                                    max_turns=settings.max_turns, prices=settings.prices)
        except asyncio.CancelledError:
            report.stopped = "interrupted"
            save_report(report, the_plan.report_path)
            raise
        report.runs.append(record)
        save_report(report, the_plan.report_path)
        outcome = "ok" if record.ok else record.error_kind
        unreachable = unreachable + 1 if (record.error_kind == "provider_error"
                                          and record.model_requests == 0) else 0
        if unreachable >= PROVIDER_FAILURES:
            report.stopped = f"{PROVIDER_FAILED}: {record.error}"
        say(f"[{len(report.runs)}/{total}] {task.name} · {cell.harness} {cell.dialect} "
            f"#{repeat}: {outcome} · {record.model_requests} requests · "
            f"{record.input_tokens + record.output_tokens:,} tokens · {record.wall_s:.1f} s")
        if report.stopped:
            break
    save_report(report, the_plan.report_path)
    return report


def _over_budget(settings: EvalSettings, report: EvalReport) -> str | None:
    if settings.max_tokens is not None and report.tokens() >= settings.max_tokens:
        return f"token budget reached ({report.tokens():,} of {settings.max_tokens:,})"
    if settings.max_cost is not None and report.cost() >= settings.max_cost:
        return f"cost budget reached (${report.cost():.4f} of ${settings.max_cost:.4f})"
    return None


def write_choice(report: EvalReport, config_path: Path) -> str:
    """Store the recommended harness and dialect for the report's model in the config
    file (``[model_harness."MODEL"]``), keeping the file's other content; says what it did."""
    import tomlkit

    from codemode.eval.report import best, summarize

    if report.stopped:
        return (f"config not written: the eval stopped early ({report.stopped}); resume it "
                "with --resume, then write the config")
    winner = best(summarize(report))
    if winner is None:
        return "config not written: no run succeeded"
    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    doc = tomlkit.parse(text)
    tables = doc.get("model_harness")
    if tables is None:
        tables = tomlkit.table(is_super_table=True)
        doc["model_harness"] = tables
    entry = tomlkit.table()
    entry["harness"] = winner.harness
    entry["code_mode"] = winner.dialect == "code"
    tables[report.model] = entry
    config_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = config_path.with_name(config_path.name + ".tmp")
    tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
    tmp.replace(config_path)
    report.recommended = {"harness": winner.harness, "dialect": winner.dialect}
    return (f"wrote [model_harness.\"{report.model}\"] harness = \"{winner.harness}\", "
            f"code_mode = {str(winner.dialect == 'code').lower()} to {config_path}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"
