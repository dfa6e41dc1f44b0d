"""Skills' front matter, attacked by a command that writes ``.agents/skills`` in the
workspace: every session's start parses each skill's front matter (YAML), so its shape
and size are the command's to choose. A skill shaped to crash or to cost seconds is a
problem said about that skill; the others still load. CPU time, not wall time: these
hold on a busy machine."""

from __future__ import annotations

import time
from pathlib import Path

from codemode.skills.discovery import (
    MAX_FRONT_MATTER,
    MAX_FRONT_MATTER_ALL,
    discover_skills,
    parse_skill_file,
)


def _skills_dir(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()  # the repository's top: its .agents/skills is searched
    return tmp_path / ".agents" / "skills"


def _skill(folder: Path, name: str, extra: str = "") -> Path:
    folder.mkdir(parents=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: does {name}\n{extra}---\nbody\n")
    return path


def _discover(tmp_path: Path) -> tuple[list[str], list[str], float]:
    started = time.process_time()
    found = discover_skills(tmp_path, user_dir=tmp_path / "no-user-skills")
    spent = time.process_time() - started
    return [s.name for s in found.skills], [str(p) for p in found.problems], spent


def test_front_matter_nested_deeper_than_the_parser_recurses_is_a_problem(
    tmp_path: Path,
) -> None:
    """A flow sequence 5,000 deep made PyYAML's Python loader raise RecursionError,
    which discovery did not catch: every session in the workspace failed to start."""
    base = _skills_dir(tmp_path)
    _skill(base / "good", "good")
    _skill(base / "deep", "deep", "z: " + "[" * 5000 + "]" * 5000 + "\n")
    names, problems, _ = _discover(tmp_path)
    assert names == ["good"]
    assert any("deep/SKILL.md" in p for p in problems), problems


def test_a_long_front_matter_is_refused_without_parsing_it(tmp_path: Path) -> None:
    """A front matter of a megabyte cost PyYAML seconds, for each such skill, at every
    session's start."""
    base = _skills_dir(tmp_path)
    _skill(base / "good", "good")
    items = "".join("  - aaaaaaaaaaaaaaaa\n" for _ in range(40_000))
    for n in range(8):
        _skill(base / f"big{n}", f"big{n}", "z:\n" + items)
    names, problems, spent = _discover(tmp_path)
    assert names == ["good"]
    assert sum(f"over {MAX_FRONT_MATTER} bytes" in p for p in problems) == 8, problems
    assert spent < 3, f"{spent:.1f} s of CPU to discover 9 skills"


def test_front_matter_read_in_all_is_bounded(tmp_path: Path) -> None:
    """Each front matter just under the cap, in hundreds of skills: what is parsed in
    all stops at ``MAX_FRONT_MATTER_ALL`` bytes, and the cut is said."""
    base = _skills_dir(tmp_path)
    flow = "z: [" + "a," * ((MAX_FRONT_MATTER - 200) // 2) + "a]\n"
    count = 4 * MAX_FRONT_MATTER_ALL // MAX_FRONT_MATTER
    for n in range(count):
        _skill(base / f"s{n:04d}", f"s{n:04d}", flow)
    names, problems, spent = _discover(tmp_path)
    assert 0 < len(names) <= MAX_FRONT_MATTER_ALL // (MAX_FRONT_MATTER - 200) + 1
    assert any(f"{MAX_FRONT_MATTER_ALL} bytes of front matter" in p for p in problems)
    assert spent < 10, f"{spent:.1f} s of CPU to discover {count} skills"


def test_an_ordinary_skill_still_parses(tmp_path: Path) -> None:
    path = _skill(tmp_path / "s", "fine-skill", "license: MIT\nmetadata: {a: [1, 2]}\n")
    assert parse_skill_file(path) == ("fine-skill", "does fine-skill")
