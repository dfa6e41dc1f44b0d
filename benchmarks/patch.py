"""Patch engine figures, printed as one JSON object.

    .venv/bin/python benchmarks/patch.py [--runs N]

Applies a 10,000-line multi-file patch (updates with many chunks each, new files, a
delete and a move) to a fresh copy of a generated workspace, and reports medians:

- parse_ms: text to model (unwrap, line lexer, lark LALR);
- plan_ms: parse plus every operation checked and computed in memory, diff included;
- apply_ms: the whole ``apply_patch_text`` call, writes included;
- apply_cpu_ms: the CPU time of that call, which other work on a busy machine inflates
  less than the wall-clock figures (``load_average`` says how busy it was).

Target: apply_ms <= 100.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from codemode.tools.context import ToolContext
from codemode.tools.patch.engine import apply_patch_text
from codemode.tools.patch.parser import parse_patch
from codemode.tools.patch.plan import make_plan

TARGET_APPLY_MS = 100.0
UPDATED_FILES = 8
LINES_PER_FILE = 2_000
CHUNKS_PER_FILE = 60
ADDED_FILES = 2
ADDED_LINES = 2_565


def source_line(f: int, i: int) -> str:
    return f"    value_{f}_{i} = compute({i}, factor={f})  # step {i}\n"


def make_workspace(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    for f in range(UPDATED_FILES + 2):
        text = "".join(source_line(f, i) for i in range(LINES_PER_FILE))
        (root / "src" / f"module_{f}.py").write_text(text)


def make_patch() -> str:
    out = ["*** Begin Patch"]
    step = LINES_PER_FILE // CHUNKS_PER_FILE
    for f in range(UPDATED_FILES + 1):
        out.append(f"*** Update File: src/module_{f}.py")
        if f == UPDATED_FILES:
            out.append("*** Move to: lib/moved.py")
        for c in range(CHUNKS_PER_FILE):
            at = c * step + 5
            out.append(f"@@ {source_line(f, at - 4).strip()}")
            out.extend(" " + source_line(f, i).rstrip("\n") for i in range(at - 3, at))
            out.append("-" + source_line(f, at).rstrip("\n"))
            out.append("+" + source_line(f, at).rstrip("\n").replace("compute", "recompute"))
            out.extend(" " + source_line(f, i).rstrip("\n") for i in range(at + 1, at + 4))
    for a in range(ADDED_FILES):
        out.append(f"*** Add File: generated/new_{a}.py")
        out.extend(f"+line {i} of generated file {a}" for i in range(ADDED_LINES))
    out.append(f"*** Delete File: src/module_{UPDATED_FILES + 1}.py")
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    patch = make_patch()
    lines = patch.count("\n")
    with tempfile.TemporaryDirectory() as tmp:
        pristine = Path(tmp) / "pristine"
        make_workspace(pristine)
        parse_patch(patch)  # load the grammar once, outside the timings
        parse_s, plan_s, apply_s, cpu_s = [], [], [], []
        for run in range(runs):
            ws = Path(tmp) / f"ws{run}"
            shutil.copytree(pristine, ws)
            ctx = ToolContext(workspace=ws)
            t0 = time.perf_counter()
            parse_patch(patch)
            parse_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            make_plan(parse_patch(patch)[0], ws, ctx)
            plan_s.append(time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            outcome = apply_patch_text(patch, ws, ctx)
            apply_s.append(time.perf_counter() - t0)
            cpu_s.append(time.process_time() - c0)
            assert len(outcome.changes) == UPDATED_FILES + 1 + ADDED_FILES + 1
            shutil.rmtree(ws)
    result = {
        "patch_lines": lines,
        "files": len(outcome.changes),
        "runs": runs,
        "parse_ms": median_ms(parse_s),
        "plan_ms": median_ms(plan_s),
        "apply_ms": median_ms(apply_s),
        "apply_cpu_ms": median_ms(cpu_s),
        "load_average": round(os.getloadavg()[0], 2),
        "target_apply_ms": TARGET_APPLY_MS,
        "python": sys.version.split()[0],
    }
    result["meets_target"] = result["apply_ms"] <= TARGET_APPLY_MS
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
