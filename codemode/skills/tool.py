"""``load_skill``: the model reads a skill's instructions, or one of its ``.js`` helpers.

Registered in a session only when skills were found. In code mode a program loads a
helper with ``await skills.require(SKILL, HELPER)`` (see ``loader.js``), which calls this
tool for the source, so the read is an ordinary, reported tool call.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from codemode.locations import small_files
from codemode.skills.discovery import SkillSet
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult

MAX_HELPER_BYTES = 512 * 1024


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


class LoadSkillArgs(StrictArgs):
    name: str = Field(description="The skill's name, as listed under Skills.")
    helper: str | None = Field(
        default=None,
        description="A .js helper of the skill (its path without .js) to get the source of; "
        "omit to get the skill's instructions.",
    )


class LoadSkillResult(ToolResult):
    name: str = Field(description="The skill.")
    path: str = Field(description="The file that was read.")
    instructions: str | None = Field(
        default=None, description="The skill's instructions (when no helper was asked for)."
    )
    helpers: list[str] = Field(
        default_factory=list, description="The skill's .js helpers, by name."
    )
    source: str | None = Field(default=None, description="The helper's source (with helper).")


def skill_tool(skills: SkillSet) -> Tool:
    """The ``load_skill`` tool over the skills found for one session."""

    def load(args: LoadSkillArgs) -> LoadSkillResult:
        skill = skills.get(args.name)
        if skill is None:
            known = ", ".join(s.name for s in skills.skills) or "none"
            raise ToolError(f"load_skill: no skill named {args.name!r} (skills: {known})")
        helpers = sorted(skill.helpers)
        if args.helper is None:
            try:
                instructions = skill.body()
            except OSError as exc:  # changed since the session started (a FIFO now...)
                raise ToolError(f"load_skill: {skill.skill_file}: {_why(exc)}") from None
            return LoadSkillResult(
                name=skill.name,
                path=str(skill.skill_file),
                instructions=instructions,
                helpers=helpers,
            )
        helper = args.helper.removesuffix(".js")
        path = skill.helpers.get(helper)
        if path is None:
            listed = ", ".join(helpers) or "none"
            raise ToolError(
                f"load_skill: skill {skill.name!r} has no helper {helper!r} (helpers: {listed})"
            )
        try:
            # A skill of the repository lies where a command may write: the helper may be
            # a FIFO, or a link to /dev/zero or to this process's environment by now.
            source = small_files.read_text(path, cap=MAX_HELPER_BYTES, errors="replace")
        except OSError as exc:
            raise ToolError(f"load_skill: {path}: {_why(exc)}") from None
        return LoadSkillResult(name=skill.name, path=str(path), helpers=helpers, source=source)

    async def handler(args: LoadSkillArgs, ctx: ToolContext) -> LoadSkillResult:
        return await asyncio.to_thread(load, args)

    return Tool(
        name="load_skill",
        description=(
            "Load a skill listed under Skills: returns its instructions (follow them) and "
            "the names of its .js helpers. With helper, returns that helper's source."
        ),
        args_model=LoadSkillArgs,
        result_model=LoadSkillResult,
        handler=handler,
        acp_kind="read",
    )
