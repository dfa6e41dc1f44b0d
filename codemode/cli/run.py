"""``interpreter run SCRIPT``: a JavaScript file against the tools, no model (one
workspace, or each of --repos in parallel)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from codemode.cli.batch_options import (
    BatchCommand,
    batch_options,
    refuse_without_repos,
    run_batch_usage,
)
from codemode.cli.options import ENGINE_CHOICES, config_option, cwd_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.cli.sandbox_options import configured_sandbox, sandbox_options

# Characters of console output and of the return value a single run keeps (beyond it,
# head and tail).
RUN_OUTPUT_CHARS = 10_000_000


@cli.command(cls=BatchCommand, context_settings={"ignore_unknown_options": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.argument("args", nargs=-1)
@click.option(
    "--engine",
    type=click.Choice(ENGINE_CHOICES),
    default="quickjs",
    show_default=True,
    help="quickjs: the quicker to start and to call tools; v8: JIT-compiled, for "
    "CPU-heavy scripts (docs/figures.md has both measured).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Wall-clock limit in seconds, measured outside the engine (the script's "
    "engine process is killed when it runs out).",
)
@click.option(
    "--memory",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Memory cap in MB: the isolate's own, and an OS cap on its engine process "
    "(typed arrays included).",
)
@click.option(
    "--max-tool-calls",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Tool calls allowed before the script is stopped (counted outside the engine).",
)
@cwd_option("Workspace the tools work in (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@click.option("-v", "--verbose", is_flag=True, help="Show each tool call on stderr.")
@click.option(
    "--trust-project-hooks",
    is_flag=True,
    help="Run the workspace's hooks even if nobody trusted them here (docs/hooks.md).",
)
@config_option()
@sandbox_options
@batch_options
def run(
    script: str,
    args: tuple[str, ...],
    engine: str,
    timeout: float,
    memory: int,
    max_tool_calls: int,
    cwd: Path,
    as_json: bool,
    verbose: bool,
    trust_project_hooks: bool,
    overrides: tuple[str, ...],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
    repos: tuple[Path, ...],
    **batch: Any,
) -> None:
    """Run SCRIPT (a .js file, or - for stdin) against the tools, without a model.

    ARGS after the script are available to it as the array `argv` (put `--` before
    them if one starts with a dash). The configured MCP servers that SCRIPT names
    (`tools.SERVER.tool(...)`) are started and their tools offered.
    Exit status: 0 done, 1 script error, 2 usage error, 3 a limit was hit, 130
    interrupted (Ctrl-C).

    With --repos, SCRIPT runs in each repository in parallel, confined to it, and
    writes a JSON Lines report; exit status 0 all done, 1 any failed.
    """
    from codemode.locations.config_file import ConfigError, raw_config

    try:
        raw = raw_config(overrides)[1]
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    # The config file's sandbox_mode, approval_policy and [sandbox], flags overriding.
    sandbox = configured_sandbox(raw, sandbox_mode, approval_policy, full_auto)
    batch_run = bool(repos) or batch.get("resume") is not None
    if not batch_run:
        from codemode.js_runtime.worker_pool import POOL

        # The engine worker boots while the rest of the command imports.
        POOL.prestart(engine, memory * 1024 * 1024)
    from codemode.commands.run import UnreadableScript, read_script, run_script
    from codemode.js_runtime.models import Limits

    try:
        source = read_script(script)
    except UnreadableScript as exc:
        raise click.UsageError(str(exc)) from None
    servers = _mcp_servers_named_in(source, overrides, raw)
    if batch_run:
        if servers:
            raise click.UsageError(
                "MCP servers are not started for batch runs (--repos), and the script "
                f"uses {', '.join(sorted(servers))}"
            )
        from codemode.sandbox.settings import SandboxSettings

        if as_json:
            raise click.UsageError("--json is for single runs; a batch writes --report")
        sys.exit(
            run_batch_usage(
                source,
                args,
                script=script,
                engine=engine,
                repos=repos,
                sandbox=SandboxSettings.model_validate(sandbox),
                verbose=verbose,
                timeout=timeout,
                memory=memory,
                max_tool_calls=max_tool_calls,
                **batch,
            )
        )
    refuse_without_repos(batch)

    limits = Limits(
        timeout_s=timeout,
        memory_mb=memory,
        max_tool_calls=max_tool_calls,
        output_chars=RUN_OUTPUT_CHARS,
    )
    from codemode.js_runtime import prestart

    # One program, then the process exits: no spare worker boots behind its own, on the
    # core the program could use.
    prestart.one_program = True
    try:
        status = run_script(
            source,
            mcp_servers=servers,
            cwd=cwd,
            engine=engine,
            limits=limits,
            argv=list(args),
            as_json=as_json,
            verbose=verbose,
            sandbox=sandbox,
            dry_run=bool(batch.get("dry_run")),
            filename="stdin" if script == "-" else script,
            raw_config=raw,
            trust_project_hooks=trust_project_hooks,
        )
    except ConfigError as exc:  # a bad [mcp_servers] table
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


def _mcp_servers_named_in(
    source: str, overrides: tuple[str, ...], raw: dict[str, Any]
) -> dict[str, Any]:
    """The ``[mcp_servers.*]`` tables of the servers ``source`` names, validated. The raw
    file (``raw``) is read first: validating needs pydantic (~50 ms), which most scripts
    can skip."""
    from codemode.mcp.referenced import servers_named_in

    tables = raw.get("mcp_servers")
    named = servers_named_in(source, tables) if isinstance(tables, dict) else {}
    if not named:
        return {}
    validated = load_config_or_usage(overrides).mcp_servers
    return {name: validated[name] for name in named}
