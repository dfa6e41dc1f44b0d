"""File tool call costs, printed as one JSON object.

    .venv/bin/python benchmarks/file_tools.py [--calls 300]

Each figure is the median over ``--calls`` calls through ``ToolRegistry.invoke`` (the
path every surface takes), in a fresh temporary workspace, in microseconds:

- ``write_new_us``: write_file of a new file three folders deep;
- ``write_over_us``: write_file over an existing file;
- ``read_us``: read_file of a 4 KB file three folders deep;
- ``patch_update_us``: apply_patch updating one line of that file;
- ``grep_tree_ms``: grep over 200 files of 4 KB (milliseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext


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
    return {k: round(v, 1) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.calls)), indent=2))


if __name__ == "__main__":
    main()
