"""The part of the system prompt that lists skills (names and descriptions only)."""

from __future__ import annotations

from importlib import resources

from codemode.skills.discovery import SkillSet


def _template(name: str) -> str:
    return resources.files("codemode.skills").joinpath(name).read_text("utf-8")


def skills_instructions(skills: SkillSet, *, code_mode: bool) -> str:
    """The Skills section for the system prompt; empty when there are none."""
    if not skills.skills:
        return ""
    lines = []
    for skill in skills.skills:
        helpers = f" (helpers: {', '.join(sorted(skill.helpers))})" if skill.helpers else ""
        lines.append(f"- {skill.name}: {skill.description}{helpers if code_mode else ''}")
    text = _template("prompt.md").replace("{{skill_list}}", "\n".join(lines))
    if code_mode and any(s.helpers for s in skills.skills):
        text += "\n" + _template("prompt_code.md")
    return text.rstrip() + "\n"


def loader_script() -> str:
    """JavaScript installing ``skills.require`` in an isolate."""
    return _template("loader.js")
