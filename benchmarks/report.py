"""Run benchmarks, keep their JSON, and write docs/figures.md from it.

    .venv/bin/python benchmarks/report.py                 # docs/figures.md from results/
    .venv/bin/python benchmarks/report.py --run runtime   # run one (or more), then write
    .venv/bin/python benchmarks/report.py --all           # run them all (~15 minutes)

The documentation quotes no measurement by hand: a figure lives in
``benchmarks/results/NAME.json`` (the benchmark's own JSON, with the date, the machine
and the command that made it) and is shown on ``docs/figures.md``, which this script
writes from those files alone (``tests/test_figures.py`` checks that the page is
exactly what they give). ``benchmarks/figures.toml`` says which benchmarks there are
and which of their figures lead each section (a label, the JSON path, the unit and the
target); every other number each one printed is listed below them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PAGE = ROOT / "docs" / "figures.md"


def catalog() -> list[dict[str, Any]]:
    with open(HERE / "figures.toml", "rb") as f:
        return list(tomllib.load(f)["benchmark"])


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": model or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gb": round(memory_gb, 1),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def run(entry: dict[str, Any]) -> dict[str, Any]:
    """Run one benchmark and keep what it printed, with where and when."""
    argv = [sys.executable, str(HERE / entry["script"]), *entry.get("args", [])]
    started = time.time()
    load = [round(x, 2) for x in os.getloadavg()]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{entry['script']} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    kept = {
        "benchmark": entry["name"],
        "command": " ".join(["python", f"benchmarks/{entry['script']}", *entry.get("args", [])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "seconds": round(time.time() - started),
        "load_average_at_start": load,
        "machine": machine(),
        "result": result,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{entry['name']}.json").write_text(json.dumps(kept, indent=2) + "\n")
    return kept


def lookup(result: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(result, dict) or part not in result:
            raise KeyError(path)
        result = result[part]
    return result


def leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every number, boolean and short string in ``value``, by its dotted path."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, f"{prefix}{k}.")]
    if isinstance(value, list):
        if all(isinstance(v, (int, float)) for v in value):
            return [(prefix[:-1], ", ".join(_show(v) for v in value))]
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, f"{prefix}{i}.")]
    return [(prefix[:-1], value)]


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(entries: list[dict[str, Any]], kept: dict[str, dict[str, Any]]) -> str:
    out = [
        "# Measured figures",
        "",
        "Written by `benchmarks/report.py` from `benchmarks/results/*.json`: do not edit by",
        "hand. Each section is one benchmark's last run, on the machine it names; the",
        "machine is shared and noisy, so compare figures of one run (ratios, the two sides",
        "of a comparison) rather than runs. How each figure is measured is in the",
        "benchmark's own docstring.",
        "",
    ]
    for entry in entries:
        # a stable anchor for links: docs/figures.md#NAME
        out += [f'<a id="{entry["name"]}"></a>', "", f"## {entry['title']}", ""]
        record = kept.get(entry["name"])
        if record is None:
            out += [f"Not run yet: `python benchmarks/report.py --run {entry['name']}`.", ""]
            continue
        m = record["machine"]
        when = "start" if "load_average_at_start" in record else "end"
        load = ", ".join(_show(x) for x in record[f"load_average_at_{when}"])
        out += [
            f"`{record['command']}`, {record['date']} ({record['seconds']} s); "
            f"{m['cpu']}, {m['cores']} cores, {_show(m['memory_gb'])} GB, {m['system']}, "
            f"Python {m['python']}; load average at the {when} {load}.",
            "",
            "| figure | measured | target |",
            "|---|---|---|",
        ]
        result = record["result"]
        for figure in entry.get("figures", []):
            try:
                value = _show(lookup(result, figure["key"]))
            except KeyError:
                value = "(not in this run)"
            unit = f" {figure['unit']}" if figure.get("unit") else ""
            out.append(f"| {figure['label']} | {value}{unit} | {figure.get('target', '')} |")
        out += ["", "<details><summary>Everything it printed</summary>", ""]
        out += ["| key | value |", "|---|---|"]
        out += [f"| `{path}` | {_show(value)} |" for path, value in leaves(result)]
        out += ["", "</details>", ""]
    return "\n".join(out)


def load_results() -> dict[str, dict[str, Any]]:
    kept = {}
    for path in sorted(RESULTS.glob("*.json")):
        record = json.loads(path.read_text())
        kept[record["benchmark"]] = record
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs="+", default=[], metavar="NAME",
                        help="benchmarks to run first (names from figures.toml)")  # fmt: skip
    parser.add_argument("--all", action="store_true", help="run every benchmark first")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args()
    entries = catalog()
    if args.list:
        for entry in entries:
            args_text = " ".join(entry.get("args", []))
            print(f"{entry['name']}: benchmarks/{entry['script']} {args_text}".rstrip())
        return
    names = {e["name"] for e in entries}
    unknown = set(args.run) - names
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    for entry in entries:
        if args.all or entry["name"] in args.run:
            print(f"running {entry['script']} ...", file=sys.stderr, flush=True)
            run(entry)
    PAGE.write_text(render(entries, load_results()))
    print(f"wrote {PAGE.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
