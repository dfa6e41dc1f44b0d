"""Skills: discovery in the repository and HOME, problems reported per file, the prompt
listing, load_skill in both dialects and skill helpers loaded by a code-mode program."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import provider_flags, run_cli

from codemode.skills.discovery import discover_skills
from codemode_testkit.scripted_server import ScriptedModelServer


def write_skill(base: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    d = base / ".agents" / "skills" / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return d


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    user = tmp_path / "user"
    codemode_home = tmp_path / "cmhome"
    codemode_home.mkdir()
    notes = write_skill(
        repo,
        "release-notes",
        "name: release-notes\ndescription: >\n  Write release notes\n  from the changelog.\n",
        "# Release notes\nList every change under a version heading.\n",
    )
    (notes / "lib").mkdir()
    (notes / "lib" / "format.js").write_text(
        "module.exports = { heading: (v) => `## Version ${v}` };\n", encoding="utf-8"
    )
    write_skill(repo, "broken-yaml", "name: [unclosed\ndescription: x\n")
    write_skill(repo, "no-description", "name: no-description\n")
    (repo / ".agents" / "skills" / "no-front").mkdir()
    (repo / ".agents" / "skills" / "no-front" / "SKILL.md").write_text("# just text\n")
    write_skill(user, "greeting", "name: greeting\ndescription: Greet people warmly.\n")
    write_skill(user, "release-notes", "name: release-notes\ndescription: the user copy\n")
    return {"repo": repo, "user": user, "home": codemode_home}


def test_discovery_reports_each_problem_and_loads_the_rest(layout: dict[str, Path]) -> None:
    found = discover_skills(layout["repo"], user_dir=layout["user"] / ".agents" / "skills")
    names = {s.name: s for s in found.skills}
    assert sorted(names) == ["greeting", "release-notes"]
    # The repository's copy hides the user's skill of the same name.
    assert names["release-notes"].scope == "repo"
    assert names["release-notes"].description == "Write release notes from the changelog."
    assert names["greeting"].scope == "user"
    assert sorted(names["release-notes"].helpers) == ["lib/format"]
    assert names["release-notes"].body().startswith("# Release notes")
    problems = {p.path.parent.name: p.message for p in found.problems}
    assert set(problems) == {"broken-yaml", "no-description", "no-front"}
    assert "not valid YAML" in problems["broken-yaml"]
    assert 'missing "description"' in problems["no-description"]
    assert "no front matter" in problems["no-front"]


def test_skills_list_command(layout: dict[str, Path]) -> None:
    run = run_cli(
        ["skills", "list"], home=layout["home"], cwd=layout["repo"], HOME=str(layout["user"])
    )
    assert run.code == 1  # malformed files make the exit status say so
    assert "release-notes  (repo: " in run.stdout
    assert "greeting  (user: " in run.stdout
    assert "[helpers: lib/format]" in run.stdout
    broken = layout["repo"] / ".agents/skills/broken-yaml/SKILL.md"
    assert f"error: {broken}: front matter is not valid YAML" in run.stderr
    as_json = run_cli(
        ["skills", "list", "--json"],
        home=layout["home"],
        cwd=layout["repo"],
        HOME=str(layout["user"]),
    )
    data = json.loads(as_json.stdout)
    assert [s["name"] for s in data["skills"]] == ["greeting", "release-notes"]
    assert len(data["problems"]) == 3


def _system_text(body: dict[str, Any]) -> str:
    return json.dumps(body)


def test_classic_session_lists_skills_and_loads_a_body_on_request(
    layout: dict[str, Path],
) -> None:
    script = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "release-notes"}}]},
        {"text": "Loaded."},
    ]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "write notes"],
            home=layout["home"],
            cwd=layout["repo"],
            HOME=str(layout["user"]),
        )
    assert run.code == 0, run.stderr
    broken = layout["repo"] / ".agents/skills/broken-yaml/SKILL.md"
    assert f"! skill not loaded: {broken}: front matter is not valid YAML" in run.stderr
    first = _system_text(server.requests[0].body)
    # Names and descriptions are listed; bodies are not sent until asked for.
    assert "release-notes: Write release notes from the changelog." in first
    assert "greeting: Greet people warmly." in first
    assert "List every change" not in first
    assert '"load_skill"' in first
    second = _system_text(server.requests[1].body)
    assert "List every change under a version heading." in second


def test_code_mode_program_loads_a_skill_helper(layout: dict[str, Path]) -> None:
    program = (
        'const fmt = await skills.require("release-notes", "lib/format");\n'
        "const again = await skills.require('release-notes', 'lib/format.js');\n"
        'const info = await tools.load_skill({name: "greeting"});\n'
        "console.log(fmt.heading('1.2'), again === fmt, info.instructions);\n"
        "try { await skills.require('release-notes', 'nope'); }\n"
        "catch (e) { console.log('refused:', e.message); }\n"
    )
    script = [{"tool_calls": [{"name": "exec", "arguments": {"code": program}}]}, {"text": "ok"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "responses"), "--code-mode", "--json", "go"],
            home=layout["home"],
            cwd=layout["repo"],
            HOME=str(layout["user"]),
        )
    assert run.code == 0, run.stderr
    assert "skills.require" in _system_text(server.requests[0].body)
    programs = [
        e["item"]
        for e in run.events()
        if e["type"] == "item.completed" and e["item"]["type"] == "code_execution"
    ]
    assert len(programs) == 1
    output = programs[0]["output"]
    assert "## Version 1.2 true Do the thing." in output
    assert "refused: load_skill: skill 'release-notes' has no helper 'nope'" in output
    # The helper was loaded once (cached) through a reported tool call under the program.
    nested = [
        e["item"]
        for e in run.events()
        if e["type"] == "item.completed" and e["item"].get("parent_id") == programs[0]["id"]
    ]
    assert [n["name"] for n in nested] == ["load_skill", "load_skill", "load_skill"]


def test_no_skills_means_no_tool_and_no_section(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    home = tmp_path / "h"
    home.mkdir()
    with ScriptedModelServer([{"text": "hi"}]) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "hello"],
            home=home,
            cwd=work,
            HOME=str(tmp_path / "emptyhome"),
        )
    assert run.code == 0, run.stderr
    body = _system_text(server.requests[0].body)
    assert "load_skill" not in body and "# Skills" not in body
