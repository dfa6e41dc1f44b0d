"""The description of the one tool that runs programs (``execute``), as MCP clients and
embedders' models read it: what a program is, then the tools it may call."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from codemode.harnesses.base import render_template
from codemode.tools.registry import ToolRegistry, code_name


def prompt(name: str) -> str:
    return (resources.files("codemode.mcp") / "prompts" / f"{name}.md").read_text("utf-8")


def execute_description(
    registry: ToolRegistry,
    workspace: Path,
    *,
    declarations: str | None = None,
    progressive: bool = False,
    brief: bool = False,
) -> str:
    """``execute``'s description: with ``progressive``, a sample of the tool names and
    where to find the rest (``search_tools``, ``describe_tool``); else the tools'
    TypeScript declarations (``declarations``, or the registry's: ``brief``, the types
    and a sentence per tool, with ``describe_tool`` for the rest)."""
    if progressive:
        sample = ", ".join(f"tools.{code_name(n)}" for n in registry.names()[:6])
        tools = render_template(
            prompt("execute_search"), {"count": str(len(registry)), "sample": sample}
        )
    else:
        if declarations is None:
            from codemode.tools.typescript import typescript_declarations

            declarations = typescript_declarations(registry, brief=brief).strip()
        template = "execute_brief" if brief else "execute_declarations"
        tools = render_template(prompt(template), {"declarations": declarations})
    text = render_template(prompt("execute"), {"workspace": str(workspace), "tools": tools})
    return text.strip()
