"""The user's own hook scripts outside the workspace (``~/.claude/hooks/fmt.sh`` named
by a hook of theirs) running code of the workspace: ``python3 -c`` or ``python3 -m
black`` with the workspace as working folder imports the workspace's ``json.py`` or
``black.py``; ``sh "$CLAUDE_PROJECT_DIR/scripts/x.sh"`` or ``. ./scripts/env.sh`` runs a
workspace file; ``$CMD`` or ``os.system(cmd)`` runs what a workspace file says. No
command can write the user's script, but a confined command can write what it runs
(docs/threat-model.md, family 2): such a hook runs in the session's sandbox. A script
that merely reads a workspace file or passes its path along still runs on the host.
Evidence of an escape, end to end, is a file in codemode's home, which no confined
command may write. Real sessions, sandboxes and hook processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hooks_support import confined_reasons, hooks_table, run_session, write_hooks
from test_redteam_hooks_scripts import _program, _put

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _user_hook(tmp_path: Path, home: Path, work: Path, script: str, name: str = "fmt.sh") -> None:
    """The user's script ``dotfiles/hooks/NAME`` (outside the workspace, where no command
    writes) holding ``script``, run by the user's hook before each model request."""
    folder = tmp_path / "dotfiles" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(script)
    program = "python3" if name.endswith(".py") else "sh"
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", f"{program} {folder / name}"))
    TrustStore(home, work).trust(discover(work, home).hooks)


def _reasons(
    tmp_path: Path, home: Path, work: Path, script: str, name: str = "fmt.sh"
) -> list[str]:
    """Why the hook runs confined, as the engine decides it; empty: on the host."""
    _user_hook(tmp_path, home, work, script, name)
    store = TrustStore(home, work)
    return confined_reasons(home, work, store)


# (the user's script, the workspace's files at first, the file the program writes and
# what it writes there: PWNED stands for the marker's path)
USER_SCRIPTS = {
    "python_dash_c": (
        "python3 -c 'import json, sys; json.load(sys.stdin)'\necho ok >> ran.txt\n",
        {},
        ("json.py", "open('PWNED', 'w')"),
    ),
    "python_dash_m": (
        "python3 -m black --check . 2>/dev/null || true\n",
        {},
        ("black.py", "open('ran.txt', 'a').write('evil\\n'); open('PWNED', 'w')"),
    ),
    "sh_project_dir_script": (
        'sh "$CLAUDE_PROJECT_DIR/scripts/x.sh"\n',
        {"scripts/x.sh": "echo ok >> ran.txt"},
        ("scripts/x.sh", "touch PWNED; echo evil >> ran.txt"),
    ),
    "run_by_path": (
        'cd "$CLAUDE_PROJECT_DIR" && ./scripts/x.sh\n',
        {"scripts/x.sh": "#!/bin/sh\necho ok >> ran.txt"},
        ("scripts/x.sh", "touch PWNED; echo evil >> ran.txt"),
    ),
    "sourced": (
        ". ./scripts/env.sh\n",
        {"scripts/env.sh": "echo ok >> ran.txt"},
        ("scripts/env.sh", "touch PWNED; echo evil >> ran.txt"),
    ),
    "program_in_a_variable": (
        "CMD=$(cat .fmtcmd)\n$CMD\n",
        {".fmtcmd": "touch ok.txt"},
        (".fmtcmd", "touch PWNED evil.txt"),
    ),
}


@pytest.mark.parametrize("case", sorted(USER_SCRIPTS))
def test_a_users_script_running_workspace_code_runs_confined(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    script, files, (planted, evil) = USER_SCRIPTS[case]
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text + "\n")
        (work / rel).chmod(0o755)
    _user_hook(tmp_path, home, work, script)
    pwned = home / "pwned"
    run = run_session(home, work, _program(_put(planted, evil.replace("PWNED", str(pwned)))))
    assert run.result.ok, run.notices()
    if "evil.txt" in evil:
        assert (work / "evil.txt").exists(), run.notices()  # (it ran what was planted)
    elif "evil" in evil:
        assert "evil" in (work / "ran.txt").read_text(), run.notices()
    assert not pwned.exists(), "the user's script ran workspace code on the host"


def test_a_users_python_script_running_a_command_it_reads_runs_confined(
    tmp_path: Path, home: Path, work: Path
) -> None:
    """The code-call rule holds for the user's own Python scripts too."""
    (work / ".fmtcmd").write_text("echo ok >> ran.txt\n")
    _user_hook(tmp_path, home, work, "import os\nos.system(open('.fmtcmd').read())\n", "fmt.py")
    pwned = home / "pwned"
    run = run_session(home, work, _program(_put(".fmtcmd", f"touch {pwned}; echo evil >> ran.txt")))
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text() == "ok\nevil\n", run.notices()
    assert not pwned.exists(), "the user's script ran the workspace's command on the host"


# What the user's scripts ordinarily do with the workspace: read it, name its files to
# a program of their own. None of it runs code a command wrote.
MENTIONS = {
    "reads_a_file": 'jq -r .name "$CLAUDE_PROJECT_DIR/package.json" > /dev/null\n',
    "cat_a_script": 'cat "$CLAUDE_PROJECT_DIR/scripts/x.sh" > /dev/null\n',
    "git_in_the_workspace": 'git -C "$CLAUDE_PROJECT_DIR" diff --stat\n',
    "path_as_an_argument": (
        "file=$(jq -r '.tool_input.file_path')\n"
        '[ -f "$file" ] && shfmt -w "$file"\n'
        'echo "edited $CLAUDE_PROJECT_DIR/scripts/x.sh" >> "$HOME/hooks.log"\n'
    ),
    "python_isolated": "python3 -I -c 'import json, sys; json.load(sys.stdin)'\n",
    "own_helper": 'python3 "$(dirname "$0")/helper.py"\n. "$(dirname "$0")/lib.sh"\n',
    "guard": (
        "cmd=$(jq -r '.tool_input.command')\n"
        'if echo "$cmd" | grep -q "rm -rf"; then echo blocked >&2; exit 2; fi\n'
    ),
}


@pytest.mark.parametrize("case", sorted(MENTIONS))
def test_a_users_script_mentioning_workspace_files_runs_on_the_host(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    (work / "scripts").mkdir()
    (work / "scripts" / "x.sh").write_text("echo hi\n")
    (work / "package.json").write_text('{"name": "x"}\n')
    helpers = tmp_path / "dotfiles" / "hooks"
    helpers.mkdir(parents=True)
    (helpers / "helper.py").write_text("print(1)\n")
    (helpers / "lib.sh").write_text("true\n")
    assert _reasons(tmp_path, home, work, MENTIONS[case]) == []


ANSWERING = {
    "python_answer": "import json, sys\ndata = json.load(sys.stdin)\nprint(json.dumps({}))\n",
    "python_literal_call": 'import subprocess\nsubprocess.run(["git", "status"], cwd=".")\n',
}


@pytest.mark.parametrize("case", sorted(ANSWERING))
def test_a_users_ordinary_python_script_runs_on_the_host(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    assert _reasons(tmp_path, home, work, ANSWERING[case], "fmt.py") == []


def test_a_users_script_that_reads_the_workspace_runs_on_the_host_end_to_end(
    tmp_path: Path, home: Path, work: Path
) -> None:
    """Only a hook run outside the sandbox can write in codemode's home."""
    mark = home / "ran-on-host"
    script = (
        'git -C "$CLAUDE_PROJECT_DIR" status --short > /dev/null 2>&1\n'
        'cat "$CLAUDE_PROJECT_DIR/notes.txt" > /dev/null\n'
        f"touch {mark}\n"
    )
    _user_hook(tmp_path, home, work, script)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok, run.notices()
    assert mark.exists(), run.notices()
