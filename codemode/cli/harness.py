"""``interpreter harness``: the harnesses (a model family's prompt and tool surface)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from codemode.cli.root import cli
from codemode.terminal.control_chars import echo, json_text


@cli.group()
def harness() -> None:
    """List and inspect harnesses (a model family's prompt and tool surface)."""


@harness.command("list")
def harness_list() -> None:
    """Every harness: name, dialects, description."""
    from codemode.assembly.toolset import session_registry
    from codemode.harnesses.catalog import harness_infos

    infos = harness_infos()
    # native offers the session's tools as they are: name them from the registry itself.
    registry = session_registry()
    try:
        own = ", ".join(tool.name for tool in registry)
    finally:
        registry.close()
    infos = [
        dataclasses.replace(i, description=f"{i.description} ({own})") if i.name == "native" else i
        for i in infos
    ]
    width = max(len(i.name) for i in infos)
    for info in infos:
        echo(f"{info.name.ljust(width)}  {'+'.join(info.dialects):<13} {info.description}")


@harness.command("show")
@click.argument("name")
@click.option("--code-mode/--classic", "code_mode", default=False, help="Show the code dialect.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def harness_show(name: str, code_mode: bool, as_json: bool) -> None:
    """The rendered prompt of harness NAME and its tools (schemas, or TypeScript in code mode)."""

    from codemode.assembly.show import describe_harness

    try:
        shown = describe_harness(name, "code" if code_mode else "classic", Path.cwd())
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        echo(json_text(shown, indent=2, ensure_ascii=False))
        return
    _print_harness(shown)


def _print_harness(shown: dict[str, Any]) -> None:
    """The prompt, then each tool's description and schema (or the text commands)."""

    echo(f"# harness {shown['name']} ({shown['dialect']})\n")
    echo(shown["instructions"])
    for tool in shown["tools"]:
        echo(f"\n## tool {tool['name']}\n\n{tool['description']}")
        if tool["name"] != "exec":
            echo(json_text(tool["parameters"], indent=2, ensure_ascii=False))
    if not shown["tools"]:
        echo("\n## actions are parsed from the reply text (no function calling)")
        for command in shown.get("commands", []):
            echo(f"\n### command {command['name']}\n\n{command['description']}")
            echo(json_text(command["parameters"], indent=2, ensure_ascii=False))
