"""Batch run figures, printed as one JSON object.

    .venv/bin/python benchmarks/batch.py [--repos 50] [--runs 3] [--ray]

Generates small git repositories and runs one script over all of them with
``interpreter run --repos``, first with ``--jobs 1``, then with ``--jobs N`` (the CPU
count), and with ``--ray`` also on the Ray backend (a local instance, started and
stopped inside each run). The script reads every text file, rewrites one, and runs
``git status`` through the shell tool (a real, sandboxed process), so each repository
costs both isolate work and a process start. Reported as medians over the runs:

- ``wall_s``: the whole command, worker start-up included;
- ``repo_ms``: the median repository's own duration from the report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INTERPRETER = Path(sys.executable).parent / "interpreter"

SCRIPT = """
const files = (await tools.glob({pattern: "**/*.txt"})).matches;
let words = 0;
for (const path of files) {
  words += (await tools.read_file({path})).content.split(/\\s+/).length;
}
await tools.write_file({path: "WORDS", content: `${words}\\n`});
const status = await tools.shell({command: "git status --short"});
return {files: files.length, words, status: status.exit_code};
"""


def make_repos(root: Path, count: int) -> None:
    for i in range(count):
        repo = root / f"repo-{i:03d}"
        (repo / "docs").mkdir(parents=True)
        for f in range(10):
            (repo / "docs" / f"page{f}.txt").write_text(f"page {f} of repository {i}\n" * 40)
    script = "; ".join(f"git init -q {root / f'repo-{i:03d}'}" for i in range(count))
    subprocess.run(["sh", "-c", script], check=True)


def run_once(workdir: Path, extra: list[str]) -> tuple[float, float]:
    report = workdir / "report.jsonl"
    started = time.perf_counter()
    proc = subprocess.run(
        [INTERPRETER, "run", "bench.js", "--repos", "repos", "--report", report, *extra],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"batch run failed ({proc.returncode}):\n{proc.stderr}")
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    return wall, statistics.median(line["duration_s"] for line in lines) * 1000


def measure(workdir: Path, extra: list[str], runs: int) -> dict[str, float]:
    walls, repos = zip(*(run_once(workdir, extra) for _ in range(runs)), strict=True)
    return {
        "wall_s": round(statistics.median(walls), 2),
        "repo_ms": round(statistics.median(repos), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="also time the Ray backend")
    args = parser.parse_args()
    jobs = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        make_repos(workdir / "repos", args.repos)
        (workdir / "bench.js").write_text(SCRIPT)
        figures: dict[str, object] = {"repositories": args.repos, "runs": args.runs}
        figures["jobs_1"] = measure(workdir, ["--jobs", "1"], args.runs)
        figures[f"jobs_{jobs}"] = measure(workdir, ["--jobs", str(jobs)], args.runs)
        if args.ray:
            ray = ["--backend", "ray", "--jobs", str(jobs)]
            figures[f"ray_jobs_{jobs}"] = measure(workdir, ray, args.runs)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
