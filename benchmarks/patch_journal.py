"""What the write journal (``codemode.tools.store.journal``) costs a patch, as JSON.

    .venv/bin/python benchmarks/patch_journal.py [--runs N]

Applies a 2,000-line patch (four files updated with 40 chunks each, one added, one
deleted, one moved) to a fresh copy of a generated workspace, with the journal and
with it switched off (its ``begin`` and ``recover`` replaced by no-ops), alternating,
and reports medians:

- with_journal_ms, without_journal_ms: the whole ``apply_patch_text`` call;
- journal_overhead_ms: the difference of the medians, and overhead_ratio (noisy on a
  busy machine: ``load_average``);
- journal_ms: the median time spent inside the journal itself in the runs with it
  (what it records, computed; ``recover``, ``begin`` and removing it), the figure noise
  inflates least.

Target: journal_ms <= 5 (a patch's originals written once more, no fsync).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codemode.tools.patch.engine import apply_patch_text
from codemode.tools.store import commit, journal

TARGET_JOURNAL_MS = 5.0
FILES = 6
LINES_PER_FILE = 1_000
CHUNKS = 40
ADDED_LINES = 400


def line(f: int, i: int) -> str:
    return f"    value_{f}_{i} = compute({i}, factor={f})  # step {i}\n"


def make_workspace(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    for f in range(FILES):
        (root / "src" / f"m{f}.py").write_text("".join(line(f, i) for i in range(LINES_PER_FILE)))


def make_patch() -> str:
    out = ["*** Begin Patch"]
    step = LINES_PER_FILE // CHUNKS
    for f in range(5):
        out.append(f"*** Update File: src/m{f}.py")
        if f == 4:
            out.append("*** Move to: lib/moved.py")
        for c in range(CHUNKS):
            at = c * step + 5
            out.append("@@")
            out.extend(" " + line(f, i).rstrip("\n") for i in range(at - 3, at))
            out.append("-" + line(f, at).rstrip("\n"))
            out.append("+" + line(f, at).rstrip("\n").replace("compute", "recompute"))
            out.extend(" " + line(f, i).rstrip("\n") for i in range(at + 1, at + 4))
    out.append("*** Add File: gen/new.py")
    out.extend(f"+generated line {i}" for i in range(ADDED_LINES))
    out.append("*** Delete File: src/m5.py")
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


@contextmanager
def timed(spent: list[float]) -> Iterator[None]:
    """Add the time spent in the journal's calls to ``spent``."""
    begin, recover, close = journal.begin, journal.recover, journal.Recording.close

    def wrap(fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent.append(time.perf_counter() - start)

        return run

    entries = commit.journal_entries
    journal.begin, journal.recover = wrap(begin), wrap(recover)  # type: ignore[assignment]
    journal.Recording.close = wrap(close)  # type: ignore[method-assign]
    commit.journal_entries = wrap(entries)
    try:
        yield
    finally:
        journal.begin, journal.recover, journal.Recording.close = begin, recover, close  # type: ignore[method-assign]
        commit.journal_entries = entries


@contextmanager
def journal_off() -> Iterator[None]:
    begin, recover = journal.begin, journal.recover
    journal.begin = lambda *a, **k: journal.Recording(None, -1)  # type: ignore[assignment]
    journal.recover = lambda workspace: []  # type: ignore[assignment]
    try:
        yield
    finally:
        journal.begin, journal.recover = begin, recover


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    text = make_patch()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CODEMODE_HOME"] = str(Path(tmp) / "home")
        template = Path(tmp) / "template"
        make_workspace(template)
        samples: dict[str, list[float]] = {"on": [], "off": []}
        inside: list[float] = []
        for run in range(runs * 2 + 2):
            kind = "on" if run % 2 else "off"
            ws = Path(tmp) / f"ws{run}"
            shutil.copytree(template, ws)
            if kind == "off":
                with journal_off():
                    start = time.perf_counter()
                    apply_patch_text(text, ws)
                    took = time.perf_counter() - start
            else:
                spent: list[float] = []
                with timed(spent):
                    start = time.perf_counter()
                    apply_patch_text(text, ws)
                    took = time.perf_counter() - start
                if run >= 2:
                    inside.append(sum(spent))
            if run >= 2:  # the first pair warms the caches
                samples[kind].append(took)
            shutil.rmtree(ws)
    on = statistics.median(samples["on"]) * 1000
    off = statistics.median(samples["off"]) * 1000
    print(
        json.dumps(
            {
                "patch_lines": text.count("\n"),
                "runs": runs,
                "with_journal_ms": round(on, 2),
                "without_journal_ms": round(off, 2),
                "journal_overhead_ms": round(on - off, 2),
                "overhead_ratio": round(on / off, 3),
                "journal_ms": round(statistics.median(inside) * 1000, 2),
                "target_journal_ms": TARGET_JOURNAL_MS,
                "load_average": round(os.getloadavg()[0], 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
