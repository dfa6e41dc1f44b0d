"""What a trusted hook's script loads from beside it, attacked by the program the model
wrote (a confined command) and by what an earlier session left there.

A hook ``python3 tools/check.py`` runs ``tools/check.py``, whose digest its trust
covers, and Python puts ``tools/`` first on the module path: ``import helper`` loads
``tools/helper.py``, and a ``json.py`` put beside it shadows the standard library's.
So trust covers the script's folder (``codemode.hooks.script_folders``), the sandbox
keeps that folder read-only while the hook is trusted, the launcher checks it again
before each start, and hooks load Python byte code from codemode's own cache, never a
``__pycache__`` a command planted. Real sessions, real confined commands, real hook
processes; the scripted model stands in for the model."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import INTERPRETER, cli_env
from confinement_support import give, run_shell, shared_dir, skip_unless
from hooks_support import hooks_table, run_session, write_hooks

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore

PYTHON = os.path.realpath(INTERPRETER.parent / "python")

__all__ = ["shared_dir"]  # a fixture


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _trust_all(home: Path, work: Path) -> None:
    TrustStore(home, work).trust(discover(work, home).hooks)


def _program(command: str) -> list[dict[str, object]]:
    """The model's program runs ``command`` confined (and says what it got); then it
    answers."""
    code = (f"const r = await tools.shell({{command: {command!r}}});\n"
            "console.log(JSON.stringify(r));\n")
    return [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]


def _checker(work: Path, ran: Path) -> None:
    """tools/check.py, which imports tools/helper.py and json; run as a PreModelRequest
    hook by the user (``~/hooks.json``), trusted with its files."""
    (work / "tools").mkdir()
    (work / "tools" / "check.py").write_text("import json\nimport helper\nhelper.check()\n")
    (work / "tools" / "helper.py").write_text(
        f"def check():\n    open({str(ran)!r}, 'a').write('ok')\n")


def _hook(home: Path, work: Path) -> None:
    write_hooks(home / "hooks.json",
                hooks_table("PreModelRequest", f"{PYTHON} tools/check.py"))
    _trust_all(home, work)


EVIL_MODULE = "import os\ndef check():\n    open({pwned!r}, 'a').write('x')\n"
EVIL_JSON = "open({pwned!r}, 'a').write('x')\n"


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
@pytest.mark.parametrize("attack", ["rewrite_import", "shadow_stdlib", "new_package"])
def test_a_module_the_hook_script_loads_written_by_the_program_does_not_run(
    attack: str, backend: str, home: Path, work: Path, tmp_path: Path
) -> None:
    """The program rewrites the module the trusted script imports, puts a ``json.py``
    beside it, or a ``helper/`` package (a folder wins over ``helper.py``). With
    bubblewrap the folder is read-only to the command; under Landlock, which cannot
    keep it, the write lands and the hook is not started (its folder changed)."""
    pwned, ran = tmp_path / "pwned", tmp_path / "ran"
    _checker(work, ran)
    _hook(home, work)
    target, text = {
        "rewrite_import": ("tools/helper.py", EVIL_MODULE),
        "shadow_stdlib": ("tools/json.py", EVIL_JSON),
        "new_package": ("tools/helper/__init__.py", EVIL_MODULE),
    }[attack]
    body = text.format(pwned=str(pwned))
    make = "mkdir -p tools/helper && " if attack == "new_package" else ""
    put = "import base64, sys; open(sys.argv[1], 'w').write(base64.b64decode(sys.argv[2]).decode())"
    command = f"{make}{PYTHON} -c \"{put}\" {target} {base64.b64encode(body.encode()).decode()}"
    run = run_session(home, work, _program(command),
                      overrides=[f"sandbox.backend={backend}"])
    landed = (work / target).exists() and str(pwned) in (work / target).read_text()
    if backend == "bubblewrap":
        assert not landed, "a confined command wrote into a trusted hook's folder"
        assert ran.read_text() == "okok", run.notices()  # both requests' hooks ran
    else:
        assert landed  # (Landlock cannot keep it: the check before the start must hold)
        assert ran.read_text() == "ok", run.notices()  # the first request's only
        assert any("tools" in n and "changed" in n for n in run.notices()), run.notices()
    assert not pwned.exists(), "the hook ran the program's module outside the sandbox"
    assert run.result.ok and len(run.model.requests) == 2


def test_byte_code_planted_beside_the_module_before_trust_is_not_loaded(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """An earlier session left ``tools/__pycache__/helper.cpython-3X.pyc``: the program's
    code, with the header Python checks (the source's size and time) copied from the
    real ``helper.py``. Python would load it in place of the source; a hook loads byte
    code from codemode's own cache instead (``PYTHONPYCACHEPREFIX``)."""
    pwned, ran = tmp_path / "pwned", tmp_path / "ran"
    _checker(work, ran)
    source = work / "tools" / "helper.py"
    evil = compile(EVIL_MODULE.format(pwned=str(pwned)), str(source), "exec")
    st = source.stat()
    header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
              + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
              + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    cached = Path(importlib.util.cache_from_source(str(source)))
    if sys.pycache_prefix:  # (this test's own Python may cache elsewhere)
        cached = source.parent / "__pycache__" / cached.name
    cached.parent.mkdir(exist_ok=True)
    cached.write_bytes(header + marshal.dumps(evil))
    # The plant works: Python run plainly on the script loads it.
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    subprocess.run([PYTHON, "tools/check.py"], cwd=work, env=plain, check=True)
    assert pwned.exists()
    pwned.unlink()
    _hook(home, work)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok, run.notices()
    assert ran.exists(), run.notices()
    assert not pwned.exists(), "the hook loaded byte code planted beside its module"


def test_the_program_cannot_write_a_trusted_hooks_folder_with_the_file_tools(
    home: Path, work: Path, tmp_path: Path
) -> None:
    _checker(work, tmp_path / "ran")
    _hook(home, work)
    code = ("for (const p of ['tools/json.py', 'tools/helper.py']) {\n"
            "  try { await tools.write_file({path: p, content: 'x = 1\\n'}); "
            "console.log('wrote ' + p) }\n"
            "  catch (e) { console.log('refused: ' + e.message) }\n"
            "}\n")
    run = run_session(home, work, [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
                                   {"text": "done"}])
    assert not (work / "tools" / "json.py").exists()
    assert "x = 1" not in (work / "tools" / "helper.py").read_text()
    said = json.dumps(run.model.requests[1].body["messages"][-1])
    assert said.count("refused: ") == 2 and "the folder it loads from" in said, said[-2000:]


def test_a_change_to_the_folder_between_sessions_asks_for_trust_again(
    home: Path, work: Path, tmp_path: Path
) -> None:
    """Someone (or a session run before the hook was trusted) adds a module beside the
    script: the hook does not run until trusted again, and the notice names the folder."""
    ran = tmp_path / "ran"
    _checker(work, ran)
    _hook(home, work)
    (work / "tools" / "json.py").write_text("raise SystemExit('shadowed')\n")
    run = run_session(home, work, [{"text": "answered"}])
    assert not ran.exists()
    assert any("not run" in n and str(work / "tools") in n for n in run.notices()), \
        run.notices()
    _trust_all(home, work)  # trusting again takes the folder as it is now
    run = run_session(home, work, [{"text": "answered"}])
    assert not ran.exists()  # (its json.py exits: the folder as trusted runs)
    assert not any("not run" in n for n in run.notices()), run.notices()


def test_trusting_a_script_in_the_workspaces_top_folder_says_what_is_not_covered(
    home: Path, work: Path
) -> None:
    """The top folder cannot be kept read-only (the whole workspace would be): trusting
    a hook whose script lies there says so, and what to do."""
    (work / "check.py").write_text("pass\n")
    (work / ".codemode").mkdir()
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PreModelRequest", f"{PYTHON} check.py"))
    out = subprocess.run([str(INTERPRETER), "hooks", "trust", "all", "--cwd", str(work)],
                         capture_output=True, text=True, env=cli_env(home), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "trusted:" in out.stdout
    assert "not covered" in out.stdout and "check.py" in out.stdout, out.stdout
    assert "folder of their own" in out.stdout, out.stdout


def test_a_module_an_unprivileged_confined_command_put_beside_the_script_is_not_run(
    shared_dir: Path, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root and as nobody: a command of another session (which holds no hook, so the
    folder is not kept from it) puts a ``json.py`` beside the trusted script. The next
    session does not run the hook, and one that started before refuses it at its next
    start."""
    skip_unless(user)
    from codemode.hooks.loading import load_hooks

    ws, home = shared_dir / "ws", shared_dir / "codemode-home"
    (ws / "tools").mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    marker = shared_dir / "evil-ran"
    (ws / "tools" / "check.py").write_text("import json\n")
    write_hooks(ws / ".codemode" / "hooks.json",
                hooks_table("PostToolUse", f"{PYTHON} tools/check.py", "Bash|shell"))
    _trust_all(home, ws)
    before = load_hooks(ws, home)  # a session started before the plant
    assert before.engine is not None and len(before.engine.hooks) == 1
    give(ws, user)
    give(home, user)
    result = run_shell(user, ws, f"printf 'open(\"{marker}\", \"w\")\\n' > tools/json.py",
                       sandbox_mode="workspace-write")
    assert (ws / "tools" / "json.py").exists(), result
    later = load_hooks(ws, home)
    assert later.engine is not None and later.engine.hooks == []
    assert any(str(ws / "tools") in n and "interpreter hooks trust" in n
               for n in later.notices), later.notices
    fields = {"tool_name": "Bash", "tool_input": {"command": "x"}, "tool_response": {}}
    asyncio.run(before.engine.fire("PostToolUse", fields, ("Bash", "shell")))
    assert not marker.exists(), "the hook imported a module a command put beside it"


@pytest.mark.parametrize(("command", "named"), [
    ("make -s fmt", "`make` runs code from the Makefile's recipes"),
    ("npx prettier --write src", "`npx` runs code from the workspace's node_modules"),
    ("bash -c 'cd app && uv run ruff check'", "`uv` runs code from"),
    ("if true; then python3 -m black .; fi", "`python3 -m` runs code from"),
])
def test_trusting_a_hook_that_runs_a_projects_tool_says_what_it_does_not_cover(
    command: str, named: str, home: Path, work: Path
) -> None:
    """What such a tool runs lies in the workspace, which trust cannot cover: the person
    trusting it is told, naming the tool, and that the hook runs confined
    (tests/test_hooks_confined.py)."""
    (work / ".codemode").mkdir()
    write_hooks(work / ".codemode" / "hooks.json",
                hooks_table("PostToolUse", command, "Edit|Write"))
    out = subprocess.run([str(INTERPRETER), "hooks", "trust", "all", "--cwd", str(work)],
                         capture_output=True, text=True, env=cli_env(home), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "note: not covered:" in out.stdout and named in out.stdout, out.stdout
    assert "runs in the session's sandbox" in out.stdout, out.stdout


def test_trusting_a_hook_whose_script_has_a_folder_of_its_own_notes_nothing(
    home: Path, work: Path
) -> None:
    (work / ".claude" / "hooks").mkdir(parents=True)
    (work / ".claude" / "hooks" / "fmt.sh").write_text("exit 0\n")
    (work / ".codemode").mkdir()
    write_hooks(work / ".codemode" / "hooks.json", hooks_table(
        "PostToolUse", 'sh "$CLAUDE_PROJECT_DIR"/.claude/hooks/fmt.sh', "Edit|Write"))
    out = subprocess.run([str(INTERPRETER), "hooks", "trust", "all", "--cwd", str(work)],
                         capture_output=True, text=True, env=cli_env(home), timeout=60)
    assert out.returncode == 0 and "trusted:" in out.stdout, out.stderr
    assert "not covered" not in out.stdout, out.stdout


@pytest.mark.parametrize("which", ["named_script", "module_beside_it"])
def test_a_file_with_another_name_a_command_can_write_is_not_trusted(
    which: str, home: Path, work: Path, tmp_path: Path
) -> None:
    """A hard link made by an earlier session: ``tools/helper.py`` (or the script
    itself) is also ``notes/h.py``. Keeping ``tools/`` read-only does not keep that
    inode: a command could rewrite it through the other name between the check and the
    start. So such a hook is not trusted, and the notice says why."""
    ran = tmp_path / "ran"
    _checker(work, ran)
    (work / "notes").mkdir()
    target = work / "tools" / ("check.py" if which == "named_script" else "helper.py")
    os.link(target, work / "notes" / "h.py")
    _hook(home, work)
    run = run_session(home, work, [{"text": "answered"}])
    assert not ran.exists(), "a hook ran a file a command can rewrite through another name"
    said = " ".join(run.notices())
    assert "not run" in said and "hard link" in said, said
