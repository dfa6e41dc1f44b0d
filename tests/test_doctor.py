"""`interpreter doctor`: user data locations, environment checks, a fix for each problem."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from agent_support import run_cli


def setup_home(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "cmhome"
    (home / "sessions").mkdir(parents=True)
    (home / "rules").mkdir()
    (home / "rules" / "default.rules").write_text('prefix_rule(pattern=["ls"], decision="allow")\n')
    (home / "sessions" / "2026-01-01-abc.jsonl").write_text("{}\n")
    (home / "AGENTS.md").write_text("Be brief.\n")
    (home / "config.toml").write_text('model_provider = "openai"\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run the tests with make test.\n")
    skill = repo / ".agents" / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: broken\n---\n")
    user = tmp_path / "user"
    user.mkdir()
    return {"home": home, "repo": repo, "user": user}


def test_doctor_reports_locations_and_problems_with_fixes(tmp_path: Path) -> None:
    d = setup_home(tmp_path)
    empty_path = tmp_path / "nobin"
    empty_path.mkdir()
    run = run_cli(
        ["doctor"], home=d["home"], cwd=d["repo"], HOME=str(d["user"]), PATH=str(empty_path)
    )
    assert run.code == 1
    out = run.stdout
    assert f"{d['home']} ($CODEMODE_HOME" in out
    assert f"{d['home'] / 'config.toml'}: found" in out
    assert f"{d['home'] / 'rules'}: 1 .rules file" in out
    assert f"{d['home'] / 'sessions'}: 1 recorded" in out
    assert f"{d['user'] / '.agents' / 'skills'}: none (folder absent)" in out
    assert "~/.codemode/AGENTS.md (10 characters)" in out
    assert "AGENTS.md (30 characters)" in out
    broken = d["repo"] / ".agents/skills/broken/SKILL.md"
    assert f'{broken}: missing "description"' in out
    # With nothing on PATH: bubblewrap and node are missing, each with its fix.
    assert "bwrap not found" in out and "fix: install it: sudo apt-get install bubblewrap" in out
    assert "node not found" in out and "fix: install Node.js 18 or newer" in out
    # The configured provider's key is missing: a failure that says what to export.
    assert "FAIL  OPENAI_API_KEY" in out
    assert "fix: export OPENAI_API_KEY=... (the key for openai)" in out
    assert "problems found" in out


def test_doctor_json_and_present_key(tmp_path: Path) -> None:
    d = setup_home(tmp_path)
    path = os.pathsep.join(p for p in [str(Path(sys.executable).parent), os.environ["PATH"]])
    run = run_cli(
        ["doctor", "--json"],
        home=d["home"],
        cwd=d["repo"],
        HOME=str(d["user"]),
        PATH=path,
        OPENAI_API_KEY="sk-test",
    )
    checks = {(c["section"], c["label"]): c for c in json.loads(run.stdout)}
    key = checks[("providers", "OPENAI_API_KEY")]
    assert key["status"] == "ok" and "openai" in key["detail"]
    for engine in ("quickjs-ng", "V8 (mini-racer)"):  # each ran a program
        assert checks[("environment", engine)]["status"] == "ok"
        assert checks[("environment", engine)]["detail"].startswith("runs programs (")
    if shutil.which("node"):
        assert checks[("environment", "node")]["status"] in ("ok", "warn")
        assert "node not found" not in checks[("environment", "node")]["detail"]
    # Every problem carries a fix.
    assert all(c["fix"] for c in checks.values() if c["status"] in ("warn", "error"))
