"""The `interpreter` command line: argument handling only; the work lives elsewhere.

Heavy modules (JavaScript engines, pydantic models, HTTP clients) are imported inside
the commands, so `interpreter --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

ENGINE_CHOICES = ("quickjs", "v8")


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="codemode", prog_name="interpreter")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """codemode: a coding agent where the model writes JavaScript against your tools."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.argument("args", nargs=-1)
@click.option("--engine", type=click.Choice(ENGINE_CHOICES), default="quickjs", show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Wall-clock limit in seconds.",
)
@click.option(
    "--memory",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Isolate memory cap in MB.",
)
@click.option(
    "--max-tool-calls",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Tool calls allowed before the script is stopped.",
)
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=".",
    help="Workspace the tools work in (default: current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@click.option("-v", "--verbose", is_flag=True, help="Show each tool call on stderr.")
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
) -> None:
    """Run SCRIPT (a .js file, or - for stdin) against the tools, without a model.

    ARGS after the script are available to it as the array `argv` (put `--` before
    them if one starts with a dash).
    Exit status: 0 done, 1 script error, 2 usage error, 3 a limit was hit.
    """
    from codemode.js_runtime.models import Limits
    from codemode.run import run_script

    limits = Limits(
        timeout_s=timeout,
        memory_mb=memory,
        max_tool_calls=max_tool_calls,
        output_chars=10_000_000,
    )
    status = run_script(
        script,
        cwd=cwd,
        engine=engine,
        limits=limits,
        argv=list(args),
        as_json=as_json,
        verbose=verbose,
    )
    sys.exit(status)


@cli.command()
@click.option("--dts", is_flag=True, help="Print TypeScript declarations (the code dialect).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON schemas (the classic dialect).")
def tools(dts: bool, as_json: bool) -> None:
    """List the built-in tools."""
    from codemode.tools.builtin import builtin_registry

    registry = builtin_registry()
    if dts:
        from codemode.tools.typescript import typescript_declarations

        click.echo(typescript_declarations(registry), nl=False)
    elif as_json:
        import json

        schemas = [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.args_model.model_json_schema(),
            }
            for t in registry
        ]
        click.echo(json.dumps(schemas, indent=2))
    else:
        width = max(len(t.name) for t in registry)
        for t in registry:
            first = (t.description.strip().splitlines() or [""])[0]
            click.echo(f"{t.name.ljust(width)}  {first}")


def session_options(fn: Any) -> Any:
    """The options every agent command shares (exec, resume, and later the interactive one)."""
    options = [
        click.option("-m", "--model", help="Model name, as the provider spells it."),
        click.option("--provider", help="Provider from the catalog or [model_providers.NAME]."),
        click.option(
            "--code-mode/--classic",
            "code_mode",
            default=None,
            help="Code dialect (one exec tool running JavaScript) or classic tool calls.",
        ),
        click.option("--harness", help="Harness (prompt and tool surface); default: native."),
        click.option(
            "-C",
            "--cwd",
            "--cd",
            "cwd",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=".",
            help="Workspace (default: current directory).",
        ),
        click.option(
            "--max-turns",
            type=click.IntRange(min=1),
            help="Most model requests in one turn before it stops.",
        ),
        click.option(
            "-c",
            "--config",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override a config key (dotted for tables; VALUE is TOML or a plain string).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print JSON Lines events."),
        click.option("--experimental-json", "as_json", is_flag=True, hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _read_prompt(prompt: str | None) -> str | None:
    if prompt == "-" or (prompt is None and not sys.stdin.isatty()):
        return sys.stdin.read()
    return prompt


def _run_agent(**kwargs: Any) -> None:
    from codemode.agent.exec import ExecOptions, UsageProblem, run_exec

    try:
        status = run_exec(ExecOptions(**kwargs))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


@cli.command("exec")
@click.argument("prompt", required=False)
@session_options
@click.option(
    "--replay",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay the model side of a recorded session (no network); tools run for real.",
)
def exec_(prompt: str | None, replay: Path | None, overrides: tuple[str, ...], **kw: Any) -> None:
    """Run PROMPT to completion without asking anything (- reads it from stdin).

    Progress goes to stderr, the final answer to stdout. Exit status: 0 done,
    1 the turn failed, 2 usage or configuration error, 130 interrupted.
    """
    if replay is None:
        prompt = _read_prompt(prompt)
    _run_agent(prompt=prompt, replay=replay, overrides=list(overrides), **kw)


@cli.command()
@click.argument("args", nargs=-1)
@click.option("--last", is_flag=True, help="Continue the most recent session.")
@session_options
def resume(args: tuple[str, ...], last: bool, overrides: tuple[str, ...], **kw: Any) -> None:
    """Continue a recorded session: resume SESSION_ID [PROMPT] or resume --last [PROMPT].

    The session keeps its file, model and dialect unless options override them.
    """
    if last:
        if len(args) > 1:
            raise click.UsageError("with --last, pass at most a PROMPT")
        ref, prompt = "", (args[0] if args else None)
    else:
        if not args:
            raise click.UsageError("pass a SESSION_ID or --last")
        ref, prompt = args[0], (args[1] if len(args) > 1 else None)
        if len(args) > 2:
            raise click.UsageError("too many arguments: resume SESSION_ID [PROMPT]")
    prompt = _read_prompt(prompt)
    if prompt is None:
        raise click.UsageError(
            "pass a PROMPT to continue with (the interactive session is not built yet)"
        )
    _run_agent(prompt=prompt, resume=ref, overrides=list(overrides), **kw)


@cli.command()
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True)
def sessions(limit: int) -> None:
    """List recorded sessions, newest first (ids for `interpreter resume`)."""
    from codemode.agent.rollout import SESSIONS_DIR, list_sessions
    from codemode.config import codemode_home

    rows = list_sessions(codemode_home() / SESSIONS_DIR)[:limit]
    if not rows:
        click.echo("no sessions recorded yet", err=True)
    for row in rows:
        click.echo(f"{row.id}  {row.model:<24} {row.dialect:<7} {row.first_prompt}")


@cli.group()
def mcp() -> None:
    """MCP servers configured as [mcp_servers.NAME]: their tools join every session."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "-c", "--config", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key."
)
def mcp_list(as_json: bool, overrides: tuple[str, ...]) -> None:
    """Start the configured servers and show each one's state and tools (exit 1 if one failed)."""
    from codemode.config import ConfigError, load_config
    from codemode.mcp.commands import list_servers

    try:
        config = load_config(overrides)
        sys.exit(list_servers(config, as_json=as_json))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


@cli.command("mcp-server")
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(min=1, max=65535),
    help="Serve streamable HTTP on 127.0.0.1:PORT instead of stdio.",
)
@click.option(
    "-C",
    "--cwd",
    "--cd",
    "cwd",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=".",
    help="Workspace the tools work in (default: current directory).",
)
@click.option(
    "-c", "--config", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key."
)
def mcp_server(http_port: int | None, cwd: Path, overrides: tuple[str, ...]) -> None:
    """Serve the tool host over MCP: `execute` runs JavaScript against the tools.

    The configured sandbox and approval policy apply; a call that would need a human's
    approval is refused with the reason, since none is attached.
    """
    from codemode.config import ConfigError, load_config
    from codemode.mcp.commands import serve

    try:
        status = serve(load_config(overrides), cwd, http_port=http_port)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit status 2."""
    try:
        status = cli.main(args=argv, prog_name="interpreter", standalone_mode=False)
    except click.UsageError as exc:
        name = exc.ctx.command_path if exc.ctx else "interpreter"
        click.echo(f"{name}: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)


if __name__ == "__main__":
    main()
