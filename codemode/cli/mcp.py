"""MCP both ways: ``interpreter mcp list`` (the configured servers, as a client) and
``interpreter mcp-server`` (the tool host served over MCP)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from codemode.cli.options import config_option, cwd_option
from codemode.cli.root import cli
from codemode.cli.sandbox_options import sandbox_options


@cli.group()
def mcp() -> None:
    """MCP servers configured as [mcp_servers.NAME]: their tools join every session."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@config_option()
def mcp_list(as_json: bool, overrides: tuple[str, ...]) -> None:
    """Start the configured servers and show each one's state and tools (exit 1 if one failed)."""
    from codemode.commands.mcp import list_servers
    from codemode.config import ConfigError, load_config

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
@cwd_option("Workspace the tools work in (default: current directory).")
@config_option()
@sandbox_options
def mcp_server(
    http_port: int | None,
    cwd: Path,
    overrides: tuple[str, ...],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
) -> None:
    """Serve the tool host over MCP: `execute` runs JavaScript against the tools.

    The configured sandbox and approval policy apply (the options override them); a
    call that would need a human's approval is refused with the reason, since none is
    attached.
    """
    from codemode.assembly.options import SessionOptions
    from codemode.commands.mcp import serve
    from codemode.config import ConfigError, load_config

    options = SessionOptions(
        cwd=cwd, sandbox_mode=sandbox_mode, approval_policy=approval_policy, full_auto=full_auto
    )
    try:
        status = serve(load_config(overrides), options, http_port=http_port)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)
