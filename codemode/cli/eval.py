"""``interpreter eval``: which harness and dialect the configured model does best with,
measured on the task suite (docs/eval.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from codemode.cli.options import config_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo


@cli.command("eval")
@click.option("-m", "--model", help="Model name (default: the configured one).")
@click.option("--provider", help="Provider (default: the configured one).")
@click.option("--harness", "harnesses", multiple=True,
              help="A harness to measure (repeatable; default: the model family's and minimal).")
@click.option("--dialect", "dialects", multiple=True, type=click.Choice(["code", "classic"]),
              help="A dialect to measure (repeatable; default: both).")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each task in each harness and dialect.")
@click.option("--task", "tasks", multiple=True, help="Only this task (repeatable).")
@click.option("--max-turns", type=click.IntRange(min=1),
              help="Model requests allowed per run (default: max_turns of the config, 50).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The JSON report (default: $CODEMODE_HOME/eval/PROVIDER-MODEL.json).")
@click.option("--resume", is_flag=True,
              help="Go on with the report's runs (after Ctrl-C or a budget stop).")
@click.option("--max-tokens", type=click.IntRange(min=1),
              help="Stop before the next run once this many tokens (in and out) are spent.")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True),
              help="Stop before the next run once this many US$ are spent (needs prices).")
@click.option("--price-input", type=click.FloatRange(min=0),
              help="US$ per million input tokens.")
@click.option("--price-output", type=click.FloatRange(min=0),
              help="US$ per million output tokens.")
@click.option("--write-config", is_flag=True,
              help="Store the recommended harness and dialect for this model in config.toml.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON, not a table.")
@config_option()
def eval_command(
    model: str | None, provider: str | None, harnesses: tuple[str, ...],
    dialects: tuple[str, ...], repeats: int, tasks: tuple[str, ...], max_turns: int | None,
    report_path: Path | None, resume: bool, max_tokens: int | None, max_cost: float | None,
    price_input: float | None, price_output: float | None, write_config: bool,
    as_json: bool, overrides: tuple[str, ...],
) -> None:
    """Run the task suite against the model in each harness and dialect; print success
    rate, requests, tokens, time and errors, and recommend one."""
    from codemode.config import ConfigError, codemode_home
    from codemode.eval.command import (
        PROVIDER_FAILED,
        EvalError,
        EvalSettings,
        plan,
        run_plan,
        write_choice,
    )
    from codemode.eval.report import save_report, table, to_json
    from codemode.eval.runner import Prices
    from codemode.eval.suite import SuiteError
    from codemode.process import interruptible

    if (price_input is None) != (price_output is None):
        raise click.UsageError("give both --price-input and --price-output")
    prices = (Prices(price_input, price_output)
              if price_input is not None and price_output is not None else None)
    config = load_config_or_usage(overrides)
    settings = EvalSettings(
        config=config, provider=provider, model=model,
        harnesses=list(harnesses), dialects=list(dialects) or ["code", "classic"],
        repeats=repeats, tasks=list(tasks), report_path=report_path, resume=resume,
        max_tokens=max_tokens, max_cost=max_cost, prices=prices,
        max_turns=max_turns or config.max_turns,
    )
    try:
        the_plan = plan(settings)
    except (EvalError, ConfigError, SuiteError) as exc:
        raise click.UsageError(str(exc)) from None
    report = the_plan.report

    def say(line: str) -> None:
        echo(line, err=True)

    cells = ", ".join(f"{c.harness} {c.dialect}" for c in the_plan.cells)
    say(f"eval of {the_plan.model} on {the_plan.provider}: {len(the_plan.tasks)} tasks × "
        f"({cells}) × {report.repeats} = {report.planned()} runs; report: "
        f"{the_plan.report_path} (Ctrl-C stops; --resume goes on)")
    try:
        report = interruptible.run(run_plan(settings, the_plan, say))
    except KeyboardInterrupt:
        say(f"interrupted after {len(report.runs)} of {report.planned()} runs; the report is "
            f"in {the_plan.report_path}; go on with the same command and --resume")
        if report.runs:
            echo(table(report))
        sys.exit(130)
    echo(to_json(report) if as_json else table(report))
    if write_config:
        say(write_choice(report, codemode_home() / "config.toml"))
        save_report(report, the_plan.report_path)
    if report.stopped and report.stopped.startswith(PROVIDER_FAILED):
        say(f"stopped: {report.stopped}; check the provider (interpreter doctor), then go "
            "on with --resume")
        sys.exit(1)
    if report.stopped:
        say(f"stopped early: {report.stopped} ({len(report.runs)} of {report.planned()} "
            "runs); raise the budget and go on with --resume")
