"""``interpreter skills list``: the skills a session in this workspace would find."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.cli.options import cwd_option
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo, json_text

if TYPE_CHECKING:
    from codemode.skills.discovery import SkillSet


@cli.group()
def skills() -> None:
    """Skills: folders with a SKILL.md in .agents/skills/ (repository) and ~/.agents/skills/."""


@skills.command("list")
@cwd_option("Where to look from (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def skills_list(cwd: Path, as_json: bool) -> None:
    """Show the skills found, where from, and any SKILL.md that could not be read.

    Exit status 1 when a SKILL.md is malformed (the others are still listed).
    """
    from codemode.skills.discovery import discover_skills

    found = discover_skills(cwd)
    if as_json:

        echo(json_text(_skills_json(found), indent=2))
    else:
        _print_skills(found)
    sys.exit(1 if found.problems else 0)


def _skills_json(found: SkillSet) -> dict[str, list[dict[str, object]]]:
    return {
        "skills": [
            {
                "name": s.name,
                "description": s.description,
                "scope": s.scope,
                "path": str(s.skill_file),
                "helpers": sorted(s.helpers),
            }
            for s in found.skills
        ],
        "problems": [{"path": str(p.path), "message": p.message} for p in found.problems],
        "searched": [{"path": str(d), "scope": scope} for d, scope in found.searched],
    }


def _print_skills(found: SkillSet) -> None:
    """One entry per skill on stdout; what was searched (when nothing was found) and
    each problem on stderr."""
    if not found.skills and not found.problems:
        places = ", ".join(str(d) for d, _ in found.searched)
        echo(f"no skills found (searched {places})", err=True)
    for s in found.skills:
        helpers = f"  [helpers: {', '.join(sorted(s.helpers))}]" if s.helpers else ""
        echo(f"{s.name}  ({s.scope}: {s.directory}){helpers}\n    {s.description}")
    for p in found.problems:
        echo(f"error: {p.path}: {p.message}", err=True)
