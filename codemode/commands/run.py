"""`interpreter run`: a JavaScript file run against the tools in one workspace, no model.

Console output goes out as it happens (warn/error to stderr, like node); the exit status
says how it ended: 0 finished, 1 the script failed, 3 a limit stopped it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from codemode.assembly.program import program_parts
from codemode.js_runtime.models import ExecEvent, ExecResult, Limits
from codemode.process import interruptible
from codemode.terminal.control_chars import echo, json_text
from codemode.tools.registry import ToolRegistry, code_name

if TYPE_CHECKING:
    from codemode.hooks.engine import HookEngine
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
            echo(event.text, file=stream, raw_to_pipe=stream is out)
        elif verbose and event.type == "tool_call.finished":
            call = event.call
            status = "ok" if call.ok else f"failed: {call.error}"
            args = json.dumps(call.args, ensure_ascii=False)
            if len(args) > 120:
                args = args[:117] + "..."
            name = code_name(call.name)
            echo(f"· tools.{name}({args}) {call.duration_ms:.0f} ms {status}", file=err)

    return on_event


def _render_value(value: object) -> str:
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
    registry: ToolRegistry | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    dry_run: bool = False,
    filename: str = "program.js",
    hooks: HookEngine | None = None,
) -> int:
    """Run one script and report it; returns the exit status.

    ``sandbox`` confines the commands the script's tools start; there is no one to
    approve anything, so a command needing approval is refused (the script sees a
    catchable exception) unless the approval policy is ``never``. ``dry_run``: no file
    is written; the unified diff of what would have changed is printed at the end.
    ``hooks``: the user's tool hooks, run on every call the script makes.
    """
    parts = program_parts(cwd, registry, sandbox=sandbox, dry_run=dry_run, hooks=hooks)
    changes = parts.dry_run
    try:
        on_event = None if as_json else _printer(verbose, out, err)
        from codemode.host import ToolHost

        host = ToolHost.from_parts(parts, engine=engine, limits=limits, globals={"argv": argv})
        try:
            result = await host.execute(source, on_event=on_event)
        finally:
            await host.aclose()
    finally:
        parts.context.sandbox.close()
    workspace = parts.context.workspace
    diff = changes.diff(workspace) if changes is not None else None
    if as_json:
        if changes is None:
            echo(result.to_json(indent=2), file=out, raw_to_pipe=True)
        else:
            data = json.loads(result.to_json())
            data["changed_files"] = changes.changed_paths(workspace)
            data["diff"] = diff
            echo(json_text(data, indent=2, ensure_ascii=False), file=out)
    else:
        if result.output_truncated:
            # The head streamed as it came; the elision marker and the tail follow.
            echo(_tail_note(result), file=out, raw_to_pipe=True)
        if result.ok and result.value is not None:
            echo(_render_value(result.value), file=out, raw_to_pipe=True)
        if result.error is not None:
            from codemode.js_runtime.error_render import render_error

            echo(render_error(result.error, source, filename), file=err)
        if changes is not None:
            _print_dry_run(diff or "", changes.changed_paths(workspace), out, err)
    return exit_status(result)


def _print_dry_run(diff: str, changed: list[str], out: TextIO, err: TextIO) -> None:
    if not changed:
        echo("dry run: no file would change", file=err)
        return
    plural = "s" if len(changed) != 1 else ""
    echo(f"dry run: {len(changed)} file{plural} would change (nothing written)", file=err)
    echo(diff if diff.endswith("\n") else diff + "\n", file=out, nl=False, raw_to_pipe=True)


def _tail_note(result: ExecResult) -> str:
    tail = [e.text for e in result.logs]
    marker = next(i for i, e in enumerate(result.logs) if e.level == "elided")
    return "\n".join(tail[marker:])


class UnreadableScript(Exception):
    """The script could not be read as UTF-8 text; the message says why."""


def read_script(script: str) -> str:
    """The text of ``script``, a file's path or ``-`` for stdin."""
    name = "stdin" if script == "-" else script
    try:
        data = sys.stdin.buffer.read() if script == "-" else Path(script).read_bytes()
    except OSError as exc:
        raise UnreadableScript(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableScript(
            f"{name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def run_script(
    source: str,
    *,
    mcp_servers: Mapping[str, dict[str, Any]] | None = None,
    raw_config: dict[str, Any] | None = None,
    trust_project_hooks: bool = False,
    **options: Any,
) -> int:
    """Run ``source`` with ``run_source``'s options; returns the exit status.

    ``mcp_servers`` (``[mcp_servers.*]`` tables) are started first and their tools
    offered as ``tools.SERVER.*``; one that fails to start is a warning on stderr, and
    the script then fails only if it calls it. Raises ConfigError for a bad table.
    The hooks a session in the workspace would run (from ``raw_config``, the config's
    raw tables) run on the script's calls; a project's untrusted ones only with
    ``trust_project_hooks``.
    """
    from codemode.hooks.loading import program_hooks
    from codemode.locations.config_file import codemode_home
    from codemode.mcp.referenced import add_servers
    from codemode.tools.builtin import builtin_registry

    notices: list[str] = []
    registry = add_servers(
        builtin_registry(), dict(mcp_servers or {}), codemode_home() / "logs", notices
    )
    loaded = program_hooks(
        Path(options["cwd"]),
        raw_config,
        sandbox=options.get("sandbox"),
        run_untrusted=trust_project_hooks,
        untrusted_hint=": trust them with `interpreter hooks trust`, or pass --trust-project-hooks",
    )
    notices += loaded.notices
    try:
        for notice in notices:
            echo(f"warning: {notice}", file=options.get("err", sys.stderr))
        program = run_source(source, registry=registry, hooks=loaded.engine, **options)
        return interruptible.run(program)
    finally:
        registry.close()
