"""``interpreter doctor``: where user data lives and what in the environment needs fixing."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from codemode.cli.options import cwd_option
from codemode.cli.root import cli
from codemode.doctor.exit_status import EXIT_BROKEN, EXIT_NOT_SET_UP, EXIT_OK
from codemode.terminal.control_chars import echo, json_text

# The statuses are the constants' (docs/doctor.md says the same, checked by a test).
HELP = f"""Show where user data lives and check the environment, with a fix for each problem.

\b
Exit status:
  {EXIT_OK}  all good
  {EXIT_BROKEN}  broken: a check failed (warn or FAIL lines, each with its fix)
  2  usage error (an unknown option)
  {EXIT_NOT_SET_UP}  not set up yet: nothing is broken, but something is missing (no model
     provider configured; todo lines say how to set it up)

--json prints {{"status": "ok" | "not_set_up" | "broken", "exit_status": N, "checks": [...]}}.
"""


@cli.command(help=HELP)
@cwd_option("Repository to look at (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--local", is_flag=True,
              help="Find model servers on this machine (llama.cpp, Ollama, LM Studio, vLLM) "
              "and run one tool-calling round trip through each.")
@click.option("--base-url", "base_urls", multiple=True, metavar="URL",
              help="With --local: check this server (e.g. http://127.0.0.1:8080/v1) "
              "instead of the usual ports.")
@click.option("--model", default=None, help="With --local: the model to ask (default: the "
              "first the server lists).")
def doctor(cwd: Path, as_json: bool, local: bool, base_urls: tuple[str, ...],
           model: str | None) -> None:
    from codemode.doctor.checks import run_checks
    from codemode.doctor.exit_status import exit_status, verdict
    from codemode.doctor.report import render

    if local or base_urls:
        from codemode.doctor.local_models import run_local_checks

        report = run_local_checks(list(base_urls), model)
    else:
        report = run_checks(cwd)
    if as_json:
        import dataclasses

        checks = [dataclasses.asdict(c) for c in report.checks]
        echo(json_text({"status": verdict(report), "exit_status": exit_status(report),
                        "checks": checks}, indent=2))
    else:
        echo(render(report))
    sys.exit(exit_status(report))
