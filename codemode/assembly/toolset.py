"""The tools a session offers, assembled in one place.

``build_session`` takes its tools from ``session_tools``, and so do
``interpreter tools`` (``tool_listing``) and ``interpreter harness show``: what a
listing prints is what the model of a session with that harness and dialect is
offered, the plan tool, skills and MCP servers included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.config import Config, codemode_home
from codemode.harnesses.base import Dialect
from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.harnesses.base import Harness
    from codemode.providers.base import ToolSpec


def session_registry(
    config: Config | None = None, notices: list[str] | None = None
) -> ToolRegistry:
    """The tools an agent session has: the built-ins, the plan tool, and the tools of the
    configured MCP servers (started here, when the session first needs their tool list;
    a server that fails to start adds a line to ``notices`` and no tools)."""
    from codemode.mcp.referenced import add_servers
    from codemode.tools.builtin import builtin_registry

    registry = builtin_registry()
    registry.add_lazy("update_plan", "codemode.tools.plan:UPDATE_PLAN")
    tables = config.mcp_servers if config is not None else {}
    notices = [] if notices is None else notices
    return add_servers(registry, tables, codemode_home() / "logs", notices)


def add_skills(
    registry: ToolRegistry, cwd: Path, dialect: Dialect
) -> tuple[str, list[str], list[str]]:
    """Offer the skills found from ``cwd``: the load_skill tool, the prompt section and,
    in code mode, the isolate's ``skills.require``. Also returns the problems found."""
    from codemode.skills.discovery import discover_skills

    skills = discover_skills(cwd)
    problems = [f"skill not loaded: {problem}" for problem in skills.problems]
    if not skills.skills:
        return "", [], problems
    from codemode.skills.prompt import loader_script, skills_instructions
    from codemode.skills.tool import skill_tool

    registry.add(skill_tool(skills))
    code = dialect == "code"
    prompt = "\n" + skills_instructions(skills, code_mode=code)
    return prompt, [loader_script()] if code else [], problems


@dataclass
class SessionTools:
    """A session's tools: ``registry`` is what it runs (the harness's surface over
    ``base``, the session's own tools)."""

    registry: ToolRegistry
    base: ToolRegistry
    skills_prompt: str = ""
    setup_scripts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Stop what the tools hold (MCP servers)."""
        self.registry.close()


def session_tools(
    config: Config | None, harness: Harness, cwd: Path, notices: list[str]
) -> SessionTools:
    """The tools of a session of ``harness`` (in its dialect) working in ``cwd``."""
    base = session_registry(config, notices)
    skills_prompt, setup_scripts, problems = add_skills(base, cwd, harness.dialect)
    surface = harness.registry(base)
    if surface is not base:
        surface.on_close(base.close)  # an adapter registry: stop the MCP servers too
    return SessionTools(surface, base, skills_prompt, setup_scripts, problems)


@dataclass
class ToolListing:
    """What a session of one harness and dialect offers: its tools, and the function
    tools its wire requests carry (in code mode ``exec`` and ``wait``)."""

    harness: Harness
    tools: SessionTools
    specs: list[ToolSpec]

    @property
    def registry(self) -> ToolRegistry:
        return self.tools.registry

    def close(self) -> None:
        self.tools.close()


def tool_listing(
    config: Config,
    cwd: Path,
    *,
    harness: str | None = None,
    code_mode: bool | None = None,
    notices: list[str] | None = None,
) -> ToolListing:
    """The tools a session started in ``cwd`` with these options would offer; unset
    options are the config's, as for ``interpreter exec`` (the harness of the configured
    provider's model family)."""
    from codemode.assembly.model import provider_named
    from codemode.assembly.parts import family_harness
    from codemode.config import ConfigError
    from codemode.harnesses.catalog import get_harness

    name = harness or config.harness
    if name is None:
        try:
            resolved = provider_named(config, None)
        except ConfigError:  # no provider configured: the listing needs none
            resolved = None
        name = family_harness(resolved)
    chosen = code_mode if code_mode is not None else config.code_mode
    dialect: Dialect = "code" if chosen else "classic"
    found = get_harness(name, dialect)
    tools = session_tools(config, found, cwd.resolve(), [] if notices is None else notices)
    return ToolListing(found, tools, found.tool_specs(tools.registry))


def listing_text(listing: ToolListing, *, dts: bool = False, as_json: bool = False) -> str:
    """``interpreter tools``'s output: one line per tool under the name the model uses
    (classic: the function tool's, ``mcp__calc__add``; code mode: as a program calls it,
    ``calc.add`` for ``tools.calc.add``), TypeScript declarations (``dts``, a file tsc
    can check a program against), or the function tools exactly as the wire sends them
    (``as_json``)."""
    from codemode.tools.registry import code_name
    from codemode.tools.surfaces import declarations, wire_schema

    if dts:
        return declarations(listing.registry, standalone=True)
    if as_json:
        import json

        return json.dumps([wire_schema(spec) for spec in listing.specs], indent=2) + "\n"
    if listing.harness.dialect == "classic" and listing.specs:
        # What the model is offered: the wire's names, not the program's.
        rows = [(spec.name, spec.description) for spec in listing.specs]
    else:  # code mode, or a text harness that offers no function tools
        rows = [(code_name(t.name), t.description) for t in listing.registry]
    width = max((len(name) for name, _ in rows), default=0)
    lines = []
    for name, description in rows:
        first = (description.strip().splitlines() or [""])[0]
        lines.append(f"{name.ljust(width)}  {first}")
    return "".join(line + "\n" for line in lines)
