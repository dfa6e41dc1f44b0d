"""`interpreter doctor`: user data locations, environment checks, a fix for each problem."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import run_cli

from codemode.doctor.exit_status import EXIT_BROKEN, EXIT_NOT_SET_UP, EXIT_OK
from codemode_testkit.scripted_server import ScriptedModelServer


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
    assert f"{d['home'] / 'writable-roots'}: none recorded yet" in out
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
    data = json.loads(run.stdout)
    assert (data["exit_status"], data["status"]) == (run.code, {0: "ok", 1: "broken"}[run.code])
    checks = {(c["section"], c["label"]): c for c in data["checks"]}
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


# --- exit statuses: all good, not set up yet, broken ----------------------------------


def doctor_json(home: Path, cwd: Path, **env: str) -> tuple[int, dict[str, Any]]:
    run = run_cli(["doctor", "--json"], home=home, cwd=cwd, **env)
    data = json.loads(run.stdout)
    assert data["exit_status"] == run.code, data  # the JSON says the status it exits with
    return run.code, data


def environment_problems(data: dict[str, Any]) -> list[str]:
    """This machine's own problems (no bubblewrap, no node, ...), which make any home
    broken; the provider section is what the tests below vary."""
    return [f"{c['label']}: {c['detail']}" for c in data["checks"]
            if c["status"] in ("warn", "error") and c["section"] != "providers"]


def test_a_fresh_home_is_not_set_up_yet(home: Path, work: Path) -> None:
    code, data = doctor_json(home, work)
    provider = next(c for c in data["checks"] if c["label"] == "model_provider")
    assert provider["status"] == "todo" and provider["detail"] == "none configured yet"
    assert "--provider llamacpp -m MODEL" in provider["fix"]
    assert "export OPENAI_API_KEY=..." in provider["fix"]
    assert str(home / "config.toml") in provider["fix"]
    broken = environment_problems(data)
    if broken:
        assert (code, data["status"]) == (EXIT_BROKEN, "broken")
        pytest.skip(f"this machine has problems of its own, so the home reads broken: {broken}")
    assert (code, data["status"]) == (EXIT_NOT_SET_UP, "not_set_up")
    text = run_cli(["doctor"], home=home, cwd=work)
    assert text.code == EXIT_NOT_SET_UP
    assert "todo  model_provider" in text.stdout
    assert "nothing broken; not set up yet: 1 todo line above" in text.stdout


def test_a_configured_provider_is_all_good(home: Path, work: Path) -> None:
    """Pointed at a real server (the scripted one): doctor says 0, and a session works."""
    with ScriptedModelServer([{"text": "it works"}]) as server:
        (home / "config.toml").write_text(
            'model_provider = "scripted"\nmodel = "test-model"\n'
            f'[model_providers.scripted]\nbase_url = "{server.base_url}"\n', encoding="utf-8")
        code, data = doctor_json(home, work)
        session = run_cli(["exec", "hi"], home=home, cwd=work)
    assert session.code == 0 and "it works" in session.stdout, session.stderr
    model = next(c for c in data["checks"] if c["label"] == "model")
    assert (model["status"], model["detail"]) == ("ok", "test-model via scripted")
    assert not [c for c in data["checks"] if c["status"] == "todo"]
    broken = environment_problems(data)
    if broken:
        assert (code, data["status"]) == (EXIT_BROKEN, "broken")
        pytest.skip(f"this machine has problems of its own, so the home reads broken: {broken}")
    assert (code, data["status"]) == (EXIT_OK, "ok")


def test_a_provider_without_a_model_is_not_set_up(home: Path, work: Path) -> None:
    (home / "config.toml").write_text('model_provider = "llamacpp"\n', encoding="utf-8")
    code, data = doctor_json(home, work)
    model = next(c for c in data["checks"] if c["label"] == "model")
    assert model["status"] == "todo" and "llamacpp" in model["detail"]
    assert code == (EXIT_BROKEN if environment_problems(data) else EXIT_NOT_SET_UP)


def test_broken_wins_over_not_set_up(home: Path, work: Path) -> None:
    # A config file that does not parse: broken, though no provider is set either.
    (home / "config.toml").write_text("model_provider = \n", encoding="utf-8")
    code, data = doctor_json(home, work)
    config = next(c for c in data["checks"] if c["label"] == "config")
    assert config["status"] == "error"
    assert (code, data["status"]) == (EXIT_BROKEN, "broken")
    # A misspelt provider: broken, with a few close names, not the catalog.
    (home / "config.toml").write_text('model_provider = "olama"\n', encoding="utf-8")
    code, data = doctor_json(home, work)
    provider = next(c for c in data["checks"] if c["label"] == "model_provider")
    assert provider["status"] == "error"
    assert "'olama' is not a known provider (did you mean" in provider["detail"]
    assert "ollama" in provider["detail"] and provider["detail"].count(" or ") <= 2
    assert (code, data["status"]) == (EXIT_BROKEN, "broken")


def test_the_statuses_are_in_the_help(home: Path, work: Path) -> None:
    run = run_cli(["doctor", "--help"], home=home, cwd=work)
    assert run.code == 0
    for status, meaning in ((EXIT_OK, "all good"), (EXIT_NOT_SET_UP, "not set up yet"),
                            (EXIT_BROKEN, "broken")):
        assert re.search(rf"^\s+{status}\s+{meaning}", run.stdout, re.M), run.stdout
    assert len({EXIT_OK, EXIT_NOT_SET_UP, EXIT_BROKEN, 2}) == 4  # 2: a usage error
    assert run_cli(["doctor", "--bogus"], home=home, cwd=work).code == 2


# --- Landlock: what the kernel does, not what securityfs lists --------------------------

_LANDLOCKED_WRITE = """
import sys
from pathlib import Path
from codemode.sandbox.confinement.landlock import Ruleset
allowed, other = Path(sys.argv[1]), Path(sys.argv[2])
try:
    Ruleset([allowed], deny_network=False).apply()
except OSError as exc:
    print("unavailable", exc)
    raise SystemExit(0)
(allowed / "in.txt").write_text("ok")
try:
    (other / "out.txt").write_text("escaped")
except PermissionError:
    print("denied")
else:
    print("written")
"""


def test_doctor_s_landlock_line_is_what_the_kernel_does(home: Path, tmp_path: Path) -> None:
    """A child confines itself with Landlock and tries to write outside: doctor says
    Landlock works exactly when the kernel refused that write (issue 30: doctor said
    "cannot tell" where `policy confinement` said it works)."""
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    child = subprocess.run([sys.executable, "-c", _LANDLOCKED_WRITE, str(allowed), str(other)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    outcome = child.stdout.split()[0]
    assert outcome in ("denied", "unavailable"), child.stdout  # "written": Landlock let it out
    works = outcome == "denied"
    assert works == (not (other / "out.txt").exists())
    _, data = doctor_json(home, tmp_path)
    line = next(c for c in data["checks"] if c["label"] == "landlock")
    assert (line["status"] == "ok") == works, (line, child.stdout)
    assert line["detail"].startswith("works (ABI ") if works else "not available" in line["detail"]
    policy = run_cli(["policy", "confinement", "--json"], home=home, cwd=tmp_path)
    assert (json.loads(policy.stdout)["backends"]["landlock"] is None) == works


def test_doctor_names_the_folders_commands_could_write(tmp_path: Path) -> None:
    """The record of written roots (``locations.written_roots``) grows with each new
    workspace; doctor says how many it holds, whether this folder is one, and how to
    trust one again."""
    d = setup_home(tmp_path)
    gone = tmp_path / "gone"
    record = d["home"] / "writable-roots"
    record.write_text(f"{os.path.realpath(d['repo'])}\n{tmp_path / 'user'}\n{gone}\n")
    run = run_cli(["doctor"], home=d["home"], cwd=d["repo"], HOME=str(d["user"]))
    line = next(x for x in run.stdout.splitlines() if "writable-roots" in x)
    assert f"{record}: 2 folders that commands of earlier sessions could write" in line
    assert "this folder is one" in line and "remove its line from that file" in line
    run = run_cli(["doctor"], home=d["home"], cwd=tmp_path, HOME=str(d["user"]))
    line = next(x for x in run.stdout.splitlines() if "writable-roots" in x)
    assert "2 folders" in line and "this folder is one" not in line
