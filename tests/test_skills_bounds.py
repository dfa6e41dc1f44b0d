"""Skills a repository holds are read at every session's start and listed to the model,
and a command can fill ``.agents/skills`` (docs/threat-model.md, families 6 and 8): what
is read and listed is bounded, and a cut is said as a skill problem."""

from __future__ import annotations

from pathlib import Path

from codemode.skills.discovery import (
    MAX_ENTRIES_READ,
    MAX_HELPERS,
    MAX_SKILLS,
    discover_skills,
)
from codemode.skills.prompt import skills_instructions


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: does {name}\n---\nbody\n")


def _skills_dir(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()  # the repository's top: its .agents/skills is searched
    return tmp_path / ".agents" / "skills"


def test_a_skills_folder_flooded_with_entries_is_read_only_so_far(tmp_path: Path) -> None:
    base = _skills_dir(tmp_path)
    _skill(base / "aaa-real", "aaa-real")
    for n in range(MAX_ENTRIES_READ * 3):
        (base / f"junk-{n:06d}").touch()
    found = discover_skills(tmp_path, user_dir=tmp_path / "no-user-skills")
    said = [str(p) for p in found.problems]
    assert any(f"more than {MAX_ENTRIES_READ} entries" in p for p in said), said


def test_more_skills_than_the_model_is_shown_are_cut_and_said(tmp_path: Path) -> None:
    base = _skills_dir(tmp_path)
    for n in range(MAX_SKILLS + 20):
        _skill(base / f"s{n:04d}", f"s{n:04d}")
    found = discover_skills(tmp_path, user_dir=tmp_path / "no-user-skills")
    assert len(found.skills) == MAX_SKILLS
    said = [str(p) for p in found.problems]
    assert any("20 not listed to the model" in p for p in said), said
    assert skills_instructions(found, code_mode=True).count("\n- ") == MAX_SKILLS


def test_a_skill_offers_at_most_so_many_helpers(tmp_path: Path) -> None:
    base = _skills_dir(tmp_path)
    _skill(base / "many", "many")
    for n in range(MAX_HELPERS * 4):
        (base / "many" / f"h{n:05d}.js").write_text("module.exports = 1;\n")
    [skill] = discover_skills(tmp_path, user_dir=tmp_path / "no-user-skills").skills
    assert len(skill.helpers) == MAX_HELPERS
