"""docs/figures.md is what benchmarks/report.py writes from benchmarks/results/ and
nothing else: no measured figure in the documentation is typed by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks/report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_results_give() -> None:
    r = report()
    page = (ROOT / "docs/figures.md").read_text()
    assert page == r.render(r.catalog(), r.load_results()), (
        "docs/figures.md differs from benchmarks/results: run python benchmarks/report.py"
    )


def test_every_result_says_when_where_and_how_and_has_its_headline_figures() -> None:
    r = report()
    entries = {e["name"]: e for e in r.catalog()}
    for name, record in r.load_results().items():
        assert name in entries, f"results/{name}.json: not in figures.toml"
        assert record["date"] and record["command"].startswith("python benchmarks/")
        assert {"cpu", "cores", "memory_gb", "system", "python"} <= set(record["machine"])
        if "skipped" in record["result"]:
            continue
        for figure in entries[name].get("figures", []):
            r.lookup(record["result"], figure["key"])  # KeyError: figures.toml is stale


def test_a_result_renders_its_headline_figures_and_everything_else() -> None:
    r = report()
    figure = {"label": "the call", "key": "a.b", "unit": "µs", "target": "≤ 60 µs"}
    entry = {"name": "x", "script": "x.py", "title": "X", "figures": [figure]}
    record = {"benchmark": "x", "command": "python benchmarks/x.py",
              "date": "2026-12-02 07:00 UTC", "seconds": 3,
              "load_average_at_start": [1.5, 1.0, 0.5],
              "machine": {"cpu": "C", "cores": 2, "memory_gb": 4.0, "system": "Linux 6",
                          "python": "3.11.7"},
              "result": {"a": {"b": 59.123, "c": [1, 2]}, "d": True, "e": 12345}}  # fmt: skip
    page = r.render([entry], {"x": record})
    assert "| the call | 59.1 µs | ≤ 60 µs |" in page
    assert "| `a.c` | 1, 2 |" in page and "| `d` | true |" in page and "| `e` | 12,345 |" in page
    assert "2 cores" in page and "2026-12-02 07:00 UTC" in page
    missing = r.render([{**entry, "figures": [{"label": "gone", "key": "no.such"}]}], {"x": record})
    assert "| gone | (not in this run) |" in missing
    assert "Not run yet" in r.render([entry], {})
    json.dumps(record)  # what report.py keeps is plain JSON
