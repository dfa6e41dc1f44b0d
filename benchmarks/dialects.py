"""Code mode against the classic dialect, on the same multi-step coding tasks.

    .venv/bin/python benchmarks/dialects.py [--runs N] [--table]

Each task is a folder under ``codemode/eval/tasks/`` (see its README.md): ``setup/`` is
copied into a fresh workspace, then a real agent session (the claude-code harness, real
tools, real isolate) runs the task twice against the scripted model server: scripted the
way a model works in the classic dialect (``classic.json``, one tool call per model step)
and the way it works in code mode (``code.js``, one or two programs). Both runs must reach
the same end state, which the task's ``verify.py`` checks. Per task and in total it
reports:

- round_trips: model requests in the turn;
- prompt_tokens: tokens of everything sent to the model, summed over requests
  (system prompt, messages, tool calls and results, tool definitions), counted with
  tiktoken ``o200k_base`` (see ``token_count.tokenizer()`` for how the encoding is
  obtained offline);
- tool_output_bytes: bytes of tool results placed in the model's context;
- wall_ms: median wall time of the whole turn.

Targets: code mode needs >= 3x fewer round trips and >= 60% fewer prompt tokens in total.
Prints one JSON object (``--table`` adds a Markdown table on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from token_count import request_tokens, tokenizer

from codemode.eval.suite import TASKS_DIR, Task, load_tasks

__all__ = ["TASKS_DIR", "Task", "load_tasks", "run_once"]

def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


async def run_once(task: Task, code: bool, root: Path, home: Path) -> dict[str, Any]:
    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session
    from codemode.config import load_config
    from codemode_testkit.scripted_server import ScriptedModelServer

    task.setup(root)
    script = task.code() if code else task.classic()
    with ScriptedModelServer(script) as server:
        config = load_config(
            [
                "model_provider=scripted",
                f"model_providers.scripted.base_url={server.base_url}",
                "model_providers.scripted.wire_api=chat",
            ],
            home=home,
        )
        options = SessionOptions(cwd=root, model="bench-model", harness="claude-code",
                                 code_mode=code)
        session = build_session(config, options, SessionSpec(record=False))
        started = time.perf_counter()
        try:
            result = await session.run_turn(task.prompt)
        finally:
            await session.aclose()
        wall_ms = (time.perf_counter() - started) * 1000
        bodies = [r.body for r in server.requests]
    if not result.ok:
        raise RuntimeError(f"{task.name} ({'code' if code else 'classic'}): {result.error}")
    task.verify(root)
    last = bodies[-1]["messages"]
    tool_bytes = sum(len(m["content"].encode()) for m in last if m["role"] == "tool")
    return {"bodies": bodies, "wall_ms": wall_ms, "tool_output_bytes": tool_bytes,
            "digest": tree_digest(root), "round_trips": len(bodies)}


def measure(task: Task, code: bool, runs: int, count: Callable[[str], int]) -> dict[str, Any]:
    walls, first = [], None
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            root, home = Path(tmp) / "repo", Path(tmp) / "home"
            root.mkdir()
            home.mkdir()
            os.environ["CODEMODE_HOME"] = str(home)
            out = asyncio.run(run_once(task, code, root, home))
        walls.append(out["wall_ms"])
        first = first or out
    assert first is not None
    return {
        "round_trips": first["round_trips"],
        "prompt_tokens": sum(request_tokens(b, count) for b in first["bodies"]),
        "tool_output_bytes": first["tool_output_bytes"],
        "wall_ms": round(statistics.median(walls), 1),
        "digest": first["digest"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per task and dialect")
    parser.add_argument("--table", action="store_true", help="also print a Markdown table")
    args = parser.parse_args()
    count, source = tokenizer()
    rows, totals = [], {d: {"round_trips": 0, "prompt_tokens": 0, "tool_output_bytes": 0,
                            "wall_ms": 0.0} for d in ("classic", "code")}
    for task in load_tasks():
        classic = measure(task, False, args.runs, count)
        code = measure(task, True, args.runs, count)
        if classic.pop("digest") != code.pop("digest"):
            raise SystemExit(f"{task.name}: classic and code mode ended in different states")
        rows.append({"task": task.name, "classic": classic, "code": code})
        for dialect, figures in (("classic", classic), ("code", code)):
            for key in totals[dialect]:
                totals[dialect][key] += figures[key]
    c, k = totals["classic"], totals["code"]
    summary = {
        "round_trip_ratio": round(c["round_trips"] / k["round_trips"], 2),
        "prompt_token_reduction": round(1 - k["prompt_tokens"] / c["prompt_tokens"], 3),
        "tool_output_reduction": round(1 - k["tool_output_bytes"] / c["tool_output_bytes"], 3),
    }
    summary["targets_met"] = (
        summary["round_trip_ratio"] >= 3 and summary["prompt_token_reduction"] >= 0.6
    )
    report = {"tokenizer": source, "runs": args.runs, "harness": "claude-code", "wire": "chat",
              "tasks": rows, "total": totals, "summary": summary}
    print(json.dumps(report, indent=2))
    if args.table:
        print(markdown(rows, totals, summary), file=sys.stderr)


def markdown(rows: list[dict[str, Any]], totals: dict[str, Any], summary: dict[str, Any]) -> str:
    lines = [
        "| task | round trips (classic / code) | prompt tokens (classic / code) "
        "| tool output bytes (classic / code) | wall ms (classic / code) |",
        "|---|---|---|---|---|",
    ]
    for row in [*rows, {"task": "**total**", **totals}]:
        a, b = row["classic"], row["code"]
        lines.append(
            f"| {row['task']} | {a['round_trips']} / {b['round_trips']} "
            f"| {a['prompt_tokens']:,} / {b['prompt_tokens']:,} "
            f"| {a['tool_output_bytes']:,} / {b['tool_output_bytes']:,} "
            f"| {a['wall_ms']:.0f} / {b['wall_ms']:.0f} |"
        )
    lines.append(
        f"\nround trips {summary['round_trip_ratio']}x fewer; prompt tokens "
        f"{summary['prompt_token_reduction']:.1%} fewer; tool output bytes "
        f"{summary['tool_output_reduction']:.1%} fewer"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
