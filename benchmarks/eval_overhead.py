"""What `interpreter eval` costs per task beyond the model: the whole suite in the
claude-code harness, both dialects, against the scripted model server (which answers at
once), so nearly all of each run's time is ours: copying the workspace, building the
session and its engine, running the tools and programs, the task's check.

    .venv/bin/python benchmarks/eval_overhead.py [--repeats N]

Prints one JSON object: per cell, the median wall time per run, the median time spent
waiting for the (scripted) model, and the median of the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    from codemode.config import load_config
    from codemode.eval.command import EvalSettings, plan, run_plan
    from codemode.eval.scripted import TaskScripts
    from codemode.eval.suite import load_tasks
    from codemode_testkit.scripted_server import ScriptedModelServer

    with tempfile.TemporaryDirectory() as tmp, \
            ScriptedModelServer(TaskScripts(load_tasks())) as server:
        os.environ["CODEMODE_HOME"] = tmp
        config = load_config(["model_provider=scripted",
                              f"model_providers.scripted.base_url={server.base_url}",
                              "model_providers.scripted.wire_api=chat"], home=Path(tmp))
        settings = EvalSettings(config=config, model="bench-model", harnesses=["claude-code"],
                                repeats=args.repeats, report_path=Path(tmp) / "report.json")
        report = asyncio.run(run_plan(settings, plan(settings), lambda line: None))
    cells = {}
    for dialect in ("code", "classic"):
        runs = [r for r in report.runs if r.dialect == dialect]
        cells[dialect] = {
            "runs": len(runs),
            "passed": sum(r.ok for r in runs),
            "wall_s_median": round(statistics.median(r.wall_s for r in runs), 3),
            "model_s_median": round(statistics.median(r.model_s for r in runs), 3),
            "ours_s_median": round(statistics.median(r.wall_s - r.model_s for r in runs), 3),
            "ours_s_max": round(max(r.wall_s - r.model_s for r in runs), 3),
        }
    print(json.dumps({"tasks": len(report.tasks), "repeats": args.repeats,
                      "harness": "claude-code", "cells": cells}, indent=2))


if __name__ == "__main__":
    main()
