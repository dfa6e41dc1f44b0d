"""``interpreter tools``: the tools a session offers, as a list, TypeScript or JSON."""

from __future__ import annotations

from typing import Any

import click

from codemode.cli.options import config_option, load_config_or_usage
from codemode.cli.root import cli


@cli.command()
@click.option("--dts", is_flag=True, help="Print TypeScript declarations (the code dialect).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON schemas (the classic dialect).")
@config_option()
def tools(dts: bool, as_json: bool, overrides: tuple[str, ...]) -> None:
    """List the tools: the built-in ones and those of the configured MCP servers
    (started to ask them; one that fails is reported on stderr)."""
    from codemode.config import ConfigError, codemode_home
    from codemode.mcp.referenced import add_servers
    from codemode.tools.builtin import builtin_registry

    notices: list[str] = []
    tables = load_config_or_usage(overrides).mcp_servers
    try:
        registry = add_servers(builtin_registry(), tables, codemode_home() / "logs", notices)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        for notice in notices:
            click.echo(f"warning: {notice}", err=True)
        _print_tools(registry, dts=dts, as_json=as_json)
    finally:
        registry.close()


def _print_tools(registry: Any, *, dts: bool, as_json: bool) -> None:
    from codemode.tools.registry import code_name

    if dts:
        from codemode.tools.typescript import typescript_declarations

        click.echo(typescript_declarations(registry, standalone=True), nl=False)
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
        width = max(len(code_name(t.name)) for t in registry)
        for t in registry:
            first = (t.description.strip().splitlines() or [""])[0]
            click.echo(f"{code_name(t.name).ljust(width)}  {first}")
