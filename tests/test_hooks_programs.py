"""Programs run without a model obey the same hooks: ``interpreter run``, batch runs
(``--repos``) and ``ToolHost(hooks=...)``; a formatter hook on edits; concurrent calls
of one ``Promise.all`` hooked concurrently (a slow hook slows only its own call)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from agent_support import run_cli
from hooks_support import PYTHON, hooks_table, merge, python_hook, run_session, script, write_hooks

from codemode.hooks.loading import program_hooks
from codemode.host import ToolHost

GUARD = ("#!/bin/sh\n"
         "if grep -q 'git push'; then echo 'pushing is for people' >&2; exit 2; fi\n")
SCRIPT = """
let refused = "";
try { await tools.shell({command: "git push origin main"}); }
catch (e) { refused = e.message; }
const ok = await tools.shell({command: "echo still-going"});
return {refused, ok: ok.output.trim()};
"""


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def guard_everything(home: Path, tmp_path: Path) -> None:
    write_hooks(home / "hooks.json",
                hooks_table("PreToolUse", str(script(tmp_path, "guard.sh", GUARD)), "Bash"))


def test_interpreter_run_obeys_the_guard(home: Path, work: Path, tmp_path: Path) -> None:
    guard_everything(home, tmp_path)
    (work / "s.js").write_text(SCRIPT)
    run = run_cli(["run", "--json", "s.js"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    value = json.loads(run.stdout)["value"]
    assert "pushing is for people" in value["refused"] and "PreToolUse hook" in value["refused"]
    assert value["ok"] == "still-going"


def test_a_batch_refactor_obeys_the_same_guard(home: Path, tmp_path: Path) -> None:
    guard_everything(home, tmp_path)
    repos = []
    for name in ("one", "two"):
        repo = tmp_path / name
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        repos.append(repo)
    (tmp_path / "s.js").write_text(SCRIPT)
    report = tmp_path / "report.jsonl"
    args = ["run", str(tmp_path / "s.js"), "--report", str(report)]
    for repo in repos:
        args += ["--repos", str(repo)]
    run = run_cli(args, home=home, cwd=tmp_path, timeout=120)
    assert run.code == 0, run.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    values = [r["value"] for r in rows if r.get("value")]
    assert len(values) == 2
    assert all("pushing is for people" in v["refused"] for v in values)


def test_tool_host_takes_hooks(home: Path, work: Path, tmp_path: Path) -> None:
    guard_everything(home, tmp_path)
    engine = program_hooks(work).engine
    assert engine is not None

    async def go() -> object:
        host = ToolHost(work, hooks=engine)
        try:
            return (await host.execute(SCRIPT)).value
        finally:
            host.close()

    value = asyncio.run(go())
    assert isinstance(value, dict) and "pushing is for people" in value["refused"]


FORMATTER = """\
import json, pathlib, re, sys
data = json.load(sys.stdin)
args = data["tool_input"]
# write_file names its path; a patch names the files it touches.
patch = "\\n".join(v for v in args.values() if isinstance(v, str))
paths = [args["path"]] if "path" in args else re.findall(
    r"^\\*\\*\\* (?:Add|Update) File: (.+)$", patch, re.M)
for path in paths:
    target = pathlib.Path(data["cwd"]) / path
    text = target.read_text()
    target.write_text("\\n".join(line.rstrip() for line in text.splitlines()) + "\\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
      "additionalContext": "formatted " + ", ".join(paths)}}))
"""
PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n x = 1\n-y = 2\n+y = 3    \n*** End Patch\n"


def test_a_formatter_hook_on_edits(home: Path, work: Path, tmp_path: Path) -> None:
    formatter = python_hook(tmp_path, "fmt.py", FORMATTER)
    write_hooks(home / "hooks.json", hooks_table("PostToolUse", formatter, "Edit|Write"))
    code = ("await tools.write_file({path: 'a.py', content: 'x = 1   \\ny = 2\\t\\n'});\n"
            f"await tools.apply_patch({json.dumps(PATCH)});\n"
            "return (await tools.read_file({path: 'a.py'})).content")
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "ok"}])
    assert (work / "a.py").read_text() == "x = 1\ny = 3\n"
    assert run.items("code_execution")[0]["value"] == "x = 1\ny = 3\n"
    sent = run.sent(1)
    assert sent.count("formatted a.py") == 2  # once per edit, with the program's result


def test_concurrent_calls_are_hooked_concurrently(
    home: Path, work: Path, tmp_path: Path, burners: None
) -> None:
    slow = script(tmp_path, "slow.sh", (
        "#!/bin/sh\n"
        "if grep -q slow-one; then sleep 3; fi\n"))
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", str(slow), "shell"))
    code = """
const t0 = Date.now(); const done = {};
await Promise.all(["slow-one", "fast-a", "fast-b"].map(async (w) => {
  await tools.shell({command: "echo " + w}); done[w] = Date.now() - t0; }));
return done;
"""
    started = time.monotonic()
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "ok"}])
    took = time.monotonic() - started
    done = run.items("code_execution")[0]["value"]
    # The fast calls finished long before the slow hook let its call through; the three
    # hooks ran at once, not one after another (generous bounds: the machine is busy).
    assert done["slow-one"] >= 3000
    assert done["fast-a"] < done["slow-one"] and done["fast-b"] < done["slow-one"]
    assert max(done["fast-a"], done["fast-b"]) < done["slow-one"] - 1000
    assert took < 60


def test_hooks_file_problems_do_not_stop_a_session(home: Path, work: Path) -> None:
    (home / "hooks.json").write_text("{ broken")
    run = run_session(home, work, [{"text": "fine"}])
    assert run.result.ok
    assert any("hooks.json: not valid JSON" in n for n in run.notices())


def test_resume_fires_session_start_with_resume(home: Path, work: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_support import provider_flags

    from codemode_testkit.scripted_server import ScriptedModelServer

    log = tmp_path / "log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    rec = python_hook(tmp_path, "rec.py", (
        "import json, os, sys\n"
        "open(os.environ['HOOK_LOG'], 'a').write(json.load(sys.stdin)['source'] + '\\n')\n"))
    write_hooks(home / "hooks.json", merge(hooks_table("SessionStart", rec)))
    with ScriptedModelServer([{"text": "one"}, {"text": "two"}]) as server:
        flags = provider_flags(server.base_url, "chat")
        first = run_cli(["exec", *flags, "hi"], home=home, cwd=work, HOOK_LOG=str(log))
        assert first.code == 0, first.stderr
        again = run_cli(["exec", *flags, "resume", "--last", "more"], home=home, cwd=work,
                        HOOK_LOG=str(log))
        assert again.code == 0, again.stderr
    assert log.read_text().split() == ["startup", "resume"]
    assert PYTHON
