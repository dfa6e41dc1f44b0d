"""``interpreter tools``: the tools a session offers, as a list, TypeScript or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from codemode.cli.options import config_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo


@cli.command()
@click.option("--dts", is_flag=True, help="Print TypeScript declarations (the code dialect).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the function tools as the wire sends them."
)
@click.option("--harness", help="The tools of a session of this harness (default: as for exec).")
@click.option(
    "--code-mode/--classic", "code_mode", default=None,
    help="The tools of a code-mode or a classic session (default: the config's).",
)
@config_option()
def tools(
    dts: bool, as_json: bool, harness: str | None, code_mode: bool | None,
    overrides: tuple[str, ...],
) -> None:
    """List the tools a session offers: the built-in ones, the plan tool, skills and those
    of the configured MCP servers (started to ask them; one that fails is reported on
    stderr), under the harness's names."""
    from codemode.assembly.toolset import listing_text, tool_listing
    from codemode.config import ConfigError

    notices: list[str] = []
    config = load_config_or_usage(overrides)
    try:
        listing = tool_listing(
            config, Path.cwd(), harness=harness, code_mode=code_mode, notices=notices
        )
    except (ConfigError, ValueError) as exc:  # an unknown harness, or a dialect it lacks
        raise click.UsageError(str(exc)) from None
    try:
        for notice in notices:
            echo(f"warning: {notice}", err=True)
        echo(listing_text(listing, dts=dts, as_json=as_json), nl=False)
    finally:
        listing.close()
