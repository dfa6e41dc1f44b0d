"""File tool call costs, printed as one JSON object.

    .venv/bin/python benchmarks/file_tools.py [--calls 300]

Each figure is the median over ``--calls`` calls through ``ToolRegistry.invoke`` (the
path every surface takes), in a fresh temporary workspace, in microseconds:

- ``write_new_us``: write_file of a new file three folders deep;
- ``write_over_us``: write_file over an existing file;
- ``read_us``: read_file of a 4 KB file three folders deep;
- ``patch_update_us``: apply_patch updating one line of that file;
- ``grep_tree_ms``: grep over 200 files of 4 KB (milliseconds);
- ``glob_big_gitignore_ms``: glob ``*`` over 300 files under a 10,000-line .gitignore
  (milliseconds, median of 5);
- ``deep_search_750_cpu_ms`` and ``deep_search_1500_cpu_ms``: CPU time of one glob
  ``**/*.txt`` plus one grep over a tree 750 (1,500) folders deep with a file in each
  (milliseconds, median of 3). A hostile repository's depth must not square a search's
  cost: each folder and file costs the walk the same at any depth, and only the
  kernel's lookup of the path grep opens each file by still grows with it (up to the
  4,096-byte limit on a path), so the second is 2 to 3 times the first (it was 4 times:
  22 CPU-s at 1,500 levels);
- ``read_20mb_lines_ms`` and ``read_20mb_lines_peak_mb``: read_file of a 20 MB file of
  empty lines and its classic text, in a fresh process (milliseconds, once; the
  process's peak resident memory over what it held before the read, in MB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext
from codemode_testkit.deep_tree import deep_tree


async def _median_us(registry, ctx, name, make_args, calls: int) -> float:
    times = []
    for i in range(calls):
        args = make_args(i)
        started = time.perf_counter()
        await registry.invoke(name, args, ctx)
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


async def measure(calls: int) -> dict[str, float]:
    registry = builtin_registry()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        ctx = ToolContext(workspace=ws)
        body = "line of text for the benchmark\n" * 130
        out = {
            "write_new_us": await _median_us(
                registry,
                ctx,
                "write_file",
                lambda i: {"path": f"a/b/c/new{i}.txt", "content": body},
                calls,
            ),
            "write_over_us": await _median_us(
                registry,
                ctx,
                "write_file",
                lambda i: {"path": "a/b/c/same.txt", "content": body + str(i)},
                calls,
            ),
            "read_us": await _median_us(
                registry, ctx, "read_file", lambda i: {"path": "a/b/c/same.txt"}, calls
            ),
        }
        (ws / "a/b/c/p.txt").write_text("x0\n" + body)

        def patch(i: int) -> dict[str, str]:
            return {
                "input": "*** Begin Patch\n*** Update File: a/b/c/p.txt\n"
                f"@@\n-x{i}\n+x{i + 1}\n*** End Patch\n"
            }

        out["patch_update_us"] = await _median_us(registry, ctx, "apply_patch", patch, calls)
        tree = ws / "tree"
        for i in range(200):
            (tree / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
            (tree / f"d{i % 10}" / f"f{i}.txt").write_text(body)
        grep = await _median_us(
            registry, ctx, "grep", lambda i: {"pattern": "never there", "path": "tree"}, 20
        )
        out["grep_tree_ms"] = grep / 1000
        ignored = ws / "ignored"
        ignored.mkdir()
        for i in range(300):
            (ignored / f"f{i}.txt").write_text("x\n")
        lines = [f"pattern{i}*x/**/y{i}" for i in range(10_000)]
        (ignored / ".gitignore").write_text("\n".join(lines) + "\n")
        glob = await _median_us(
            registry, ctx, "glob", lambda i: {"pattern": "*", "path": "ignored"}, 5
        )
        out["glob_big_gitignore_ms"] = glob / 1000
        for depth in (750, 1500):
            out[f"deep_search_{depth}_cpu_ms"] = await _deep_search_cpu_ms(registry, ws, depth)
        (ws / "nl.txt").write_text("\n" * (20 * 1024 * 1024 - 10))
        ms, peak = _read_in_child(ws)
        out["read_20mb_lines_ms"] = ms
        out["read_20mb_lines_peak_mb"] = peak
    return {k: round(v, 1) for k, v in out.items()}


async def _deep_search_cpu_ms(registry, ws: Path, depth: int) -> float:
    top = ws / f"deep{depth}"
    deep_tree(top, depth)
    ctx = ToolContext(workspace=top)
    times = []
    try:
        for _ in range(3):
            started = time.process_time()  # every thread: the tools run in a worker one
            await registry.invoke("glob", {"pattern": "**/*.txt"}, ctx)
            await registry.invoke("grep", {"pattern": "needle", "max_results": 5000}, ctx)
            times.append((time.process_time() - started) * 1000)
    finally:
        # TemporaryDirectory's clean-up recurses, and would fail on it
        subprocess.run(["rm", "-rf", "--one-file-system", str(top)], check=True)
    return statistics.median(times)


READ_CHILD = """
import asyncio, json, sys, time
from pathlib import Path
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext
from codemode.tools.read_file import READ_FILE

def status(field):
    # ru_maxrss would count the parent's peak, which a child inherits across exec.
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field))

async def main():
    reg, ctx = builtin_registry(), ToolContext(workspace=Path(sys.argv[1]))
    await reg.invoke("list_dir", {}, ctx)
    before = status("VmRSS:")
    started = time.perf_counter()
    READ_FILE.text(await reg.invoke("read_file", {"path": "nl.txt"}, ctx))
    ms = (time.perf_counter() - started) * 1000
    print(json.dumps([ms, (status("VmHWM:") - before) / 1024]))

asyncio.run(main())
"""


def _read_in_child(ws: Path) -> tuple[float, float]:
    proc = subprocess.run(
        [sys.executable, "-c", READ_CHILD, str(ws)], capture_output=True, text=True, check=True
    )
    ms, peak = json.loads(proc.stdout)
    return float(ms), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.calls)), indent=2))


if __name__ == "__main__":
    main()
