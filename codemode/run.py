"""`interpreter run`: a JavaScript file run against the tools in one workspace, no model.

Console output goes out as it happens (warn/error to stderr, like node); the exit status
says how it ended: 0 finished, 1 the script failed, 3 a limit stopped it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from codemode.host import ToolHost
from codemode.js_runtime.models import ExecEvent, ExecResult, Limits

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings

EXIT_OK, EXIT_SCRIPT_ERROR, EXIT_USAGE, EXIT_LIMIT = 0, 1, 2, 3


def exit_status(result: ExecResult) -> int:
    if result.error is None:
        return EXIT_OK
    return EXIT_LIMIT if result.error.kind == "limit" else EXIT_SCRIPT_ERROR


def _printer(verbose: bool, out: TextIO, err: TextIO) -> Any:
    def on_event(event: ExecEvent) -> None:
        if event.type == "log":
            stream = err if event.level in ("warn", "error") else out
            print(event.text, file=stream, flush=True)
        elif verbose and event.type == "tool_call.finished":
            call = event.call
            status = "ok" if call.ok else f"failed: {call.error}"
            args = json.dumps(call.args, ensure_ascii=False)
            if len(args) > 120:
                args = args[:117] + "..."
            print(f"· tools.{call.name}({args}) {call.duration_ms:.0f} ms {status}", file=err)

    return on_event


def _render_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


async def run_source(
    source: str,
    *,
    cwd: Path,
    engine: str,
    limits: Limits,
    argv: list[str],
    as_json: bool = False,
    verbose: bool = False,
    sandbox: SandboxSettings | Mapping[str, Any] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run one script and report it; returns the exit status.

    ``sandbox`` confines the commands the script's tools start; there is no one to
    approve anything, so a command needing approval is refused (the script sees a
    catchable exception) unless the approval policy is ``never``.
    """
    host = ToolHost(cwd, engine=engine, limits=limits, globals={"argv": argv}, sandbox=sandbox)
    try:
        on_event = None if as_json else _printer(verbose, out, err)
        result = await host.execute(source, on_event=on_event)
    finally:
        host.close()
    if as_json:
        print(result.to_json(indent=2), file=out)
    else:
        if result.output_truncated:
            # The head streamed as it came; the elision marker and the tail follow.
            print(_tail_note(result), file=out)
        if result.ok and result.value is not None:
            print(_render_value(result.value), file=out)
        if result.error is not None:
            print(result.error.one_line(), file=err)
    return exit_status(result)


def _tail_note(result: ExecResult) -> str:
    tail = [e.text for e in result.logs]
    marker = next(i for i, e in enumerate(result.logs) if e.level == "elided")
    return "\n".join(tail[marker:])


def run_script(script: str, **options: Any) -> int:
    """Read ``script`` (``-`` for stdin) and run it with ``run_source``'s options;
    returns the exit status."""
    source = sys.stdin.read() if script == "-" else Path(script).read_text(encoding="utf-8")
    return asyncio.run(run_source(source, **options))
