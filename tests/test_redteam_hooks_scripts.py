"""What a trusted hook's script starts in turn, attacked by the program the model wrote
(a confined command).

A hook ``sh .codemode/hooks/fmt.sh`` is trusted with the script and its folder
(``codemode.hooks.script_folders``); what the script *starts* is not covered by that:
``make`` runs the Makefile's recipes, ``python3 -m``/``-c`` imports from the working
folder, ``source scripts/lib.sh`` runs a file outside the folder. Any of those a
confined command can rewrite, and outside the sandbox the hook would run it with the
user's rights. So such a hook runs in the sandbox (``codemode.hooks.script_scan``), as
a hook naming the tool itself does. Evidence of an escape is a file in codemode's home,
which no confined command may write. Real sessions, sandboxes and hook processes; the
scripted model stands in for the model."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hooks_support import hooks_table, run_session, write_hooks

from codemode.hooks import project_runners
from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make here")


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _program(command: str) -> list[dict[str, object]]:
    """The model's program runs ``command`` confined; then it answers."""
    code = f"await tools.shell({{command: {command!r}}});\n"
    return [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]


def _hook(home: Path, work: Path, script: str, command: str | None = None) -> TrustStore:
    """``.codemode/hooks/fmt.sh`` holding ``script``, run before each model request by
    the user's hook (``~/hooks.json``), trusted with its files."""
    folder = work / ".codemode" / "hooks"
    folder.mkdir(parents=True)
    (folder / "fmt.sh").write_text(script)
    write_hooks(
        home / "hooks.json", hooks_table("PreModelRequest", command or "sh .codemode/hooks/fmt.sh")
    )
    store = TrustStore(home, work)
    store.trust(discover(work, home).hooks)
    return store


def _put(path: str, text: str) -> str:
    """A shell command (for the program) writing ``text`` to ``path``."""
    return f"mkdir -p $(dirname {path}) && printf '%s\\n' {text!r} > {path}"


# (the script's line, what the program rewrites, the plant's first line)
MAKE_SPELLINGS = {
    "plain": "make -s fmt",
    "env": "env make -s fmt",
    "command": "command make -s fmt",
    "timeout": "timeout 20 make -s fmt",
    "backslash": "m\\ake -s fmt",
    "quoted": "m''ake -s fmt",
    "variable": "M=make; $M -s fmt",
    "from_python": 'python3 -c \'import subprocess; subprocess.run(["make", "-s", "fmt"])\'',
}


@needs_make
@pytest.mark.parametrize("spelling", sorted(MAKE_SPELLINGS))
def test_a_build_tool_the_trusted_script_starts_runs_confined(
    spelling: str, home: Path, work: Path
) -> None:
    """The script runs ``make fmt`` (spelt as scripts spell it); the program rewrites the
    Makefile's recipe. The next run of the hook runs the new recipe in the sandbox."""
    pwned = home / "pwned"
    (work / "Makefile").write_text("fmt:\n\t@echo ok >> ran.txt\n")
    store = _hook(home, work, MAKE_SPELLINGS[spelling] + "\n")
    recipe = f"fmt:\n\t@touch {pwned}; echo evil >> ran.txt\n"
    run = run_session(home, work, _program(f"printf {recipe!r} > Makefile"))
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text() == "ok\nevil\n", run.notices()  # both ran
    assert not pwned.exists(), "a recipe the trusted script's make ran, ran on the host"
    # (and the person trusting it was told)
    hook = discover(work, home).hooks[0]
    assert any("`make`" in n for n in store.not_covered(hook)), store.not_covered(hook)


@pytest.mark.parametrize(
    "line,planted",
    [
        (". ./scripts/env.sh", "scripts/env.sh"),
        (". scripts/lib.sh", "scripts/lib.sh"),
        ("sh tools/x.sh", "tools/x.sh"),
        ('. "$CLAUDE_PROJECT_DIR/scripts/lib.sh"', "scripts/lib.sh"),
        ('. "$(dirname "$0")/../../scripts/lib.sh"', "scripts/lib.sh"),
        ("python3 tools/y.py", "tools/y.py"),
    ],
)
def test_a_file_the_trusted_script_runs_by_a_workspace_path_runs_confined(
    line: str, planted: str, home: Path, work: Path
) -> None:
    """The script sources or runs a file outside its covered folder; the program
    rewrites that file. The next run happens in the sandbox."""
    pwned = home / "pwned"
    python = planted.endswith(".py")
    ok = "open('ran.txt', 'a').write('ok\\n')" if python else "echo ok >> ran.txt"
    (work / planted).parent.mkdir(parents=True, exist_ok=True)
    (work / planted).write_text(ok + "\n")
    _hook(home, work, line + "\n")
    evil = (
        f"open('ran.txt', 'a').write('evil\\n'); open({str(pwned)!r}, 'w')"
        if python
        else f"touch {pwned}; echo evil >> ran.txt"
    )
    run = run_session(home, work, _program(_put(planted, evil)))
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text() == "ok\nevil\n", run.notices()
    assert not pwned.exists(), "a file the trusted script sourced ran on the host"


@pytest.mark.parametrize(
    "command",
    [
        "python3 -c 'import json, sys; json.load(sys.stdin)'",
        "sh .codemode/hooks/fmt.sh",  # (whose script says the same)
    ],
)
def test_python_dash_c_in_the_workspace_imports_a_module_the_program_planted(
    command: str, home: Path, work: Path
) -> None:
    """``python3 -c`` (and ``-`` or a here-document) puts the working folder first on the
    module path: a ``json.py`` the program leaves at the workspace's top shadows the
    standard library's. Such a hook runs confined."""
    pwned = home / "pwned"
    _hook(home, work, "python3 -c 'import json, sys; json.load(sys.stdin)'\n", command)
    run = run_session(home, work, _program(_put("json.py", f"open({str(pwned)!r}, 'w')")))
    assert run.result.ok, run.notices()
    assert (work / "json.py").exists()
    assert not pwned.exists(), "python -c imported the program's json.py on the host"


def test_python_run_isolated_is_not_confined(work: Path) -> None:
    """``-I`` (or ``-P``) keeps the working folder off the module path: nothing to say."""
    assert project_runners.notes(["python3", "-I", "-c", "import json"], work) == []
    assert project_runners.notes(["python3", "-P", "-m", "json.tool"], work) == []
    assert project_runners.notes(["python3", "-X", "dev", "-c", "pass"], work) != []


def test_a_program_on_path_whose_first_line_names_node_is_a_project_tool(
    tmp_path: Path, work: Path
) -> None:
    """A globally installed ``eslint`` or ``prettier`` is a Node script: it loads its
    config (code) and plugins from the workspace, as ``node`` does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "lintjs"
    tool.write_text("#!/usr/bin/env node\nrequire('./x')\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    said = project_runners.notes(["lintjs", "--fix", "."], work, env)
    assert any("node" in n for n in said), said


@needs_make
def test_a_confined_hook_forging_a_huge_exit_status_frame_is_a_failure_not_a_crash(
    home: Path, work: Path
) -> None:
    """The confined hook writes its own frame into the trampoline's output (its
    parent's fd 1, through /proc): an exit status of 5000 digits, which ``int`` refuses.
    The session goes on; the hook's answer is whatever it is, never a traceback."""
    forge = (
        "import os, struct\\n"
        "pid = os.getppid()\\n"
        "while pid > 1:\\n"
        "    try:\\n"
        "        fd = os.open(f'/proc/{pid}/fd/1', os.O_WRONLY)\\n"
        "        os.write(fd, struct.pack('>cI', b'X', 5000) + b'9' * 5000)\\n"
        "        os.close(fd)\\n"
        "    except OSError:\\n"
        "        pass\\n"
        "    pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\\n"
    )
    (work / "forge.py").write_text(forge.replace("\\n", "\n"))
    (work / "Makefile").write_text("guard:\n\t@python3 forge.py\n")
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", "make -s guard"))
    TrustStore(home, work).trust(discover(work, home).hooks)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok and run.result.final_message == "answered", run.notices()
