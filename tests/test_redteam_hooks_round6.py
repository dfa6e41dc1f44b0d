"""Round 6 against the text rule that decides whether a trusted hook's scripts run code
a confined command could have written (``codemode.hooks.script_runs``,
``codemode.hooks.script_scan``; docs/threat-model.md, family 2): ordinary spellings, as
an honest author writes them, of running a command, module or file the workspace holds.

- Python: a module or call under another name (``import subprocess as sp``, ``from os
  import system as sh``, ``getattr(os, "system")``, ``functools.partial(subprocess.run,
  shell=True)``), the working folder put on the module path (``sys.path.insert(0,
  ".")``, ``site.addsitedir(".")``, whose ``.pth`` files run), a file loaded as a module
  (``spec_from_file_location`` and ``exec_module``), a shell fed its script on stdin
  (``subprocess.run(["sh"], input=...)``), a pickle read back (``pickle.load``);
- shell: a shell's ``-c`` among other flags (``bash -lc "$X"``, ``sh -ec``), a variable
  program after a flag or a wrapper (``env -S``, ``command -p``, ``timeout 20``, ``nice
  -n 10``, ``sh -e "$S"``), a shell reading its script from a pipe, a redirect or a
  here-string (``cat .cmds | sh``, ``sh < .cmds``, ``bash <<< "$X"``, ``. /dev/stdin``),
  ``run-parts DIR``, and ``PATH="$CLAUDE_PROJECT_DIR/tools/bin:$PATH" tool``.

Each ran the workspace's code on the host before (the marker in codemode's home, which
no confined command may write), but for ``run-parts``, ``PATH=`` and ``sh <
"$CLAUDE_PROJECT_DIR/..."`` in the hook's own file, where a workspace path counts
wherever it is written.
Real sessions, sandboxes and hook processes; the scripted model stands in for the
model. Then other spellings, read by the scan alone, and ordinary hooks, which stay on
the host."""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path

import pytest
from hooks_support import run_session
from test_redteam_hooks_dynamic import _reasons, _scanned, _trusted
from test_redteam_hooks_dynamic_user import _reasons as _user_reasons
from test_redteam_hooks_dynamic_user import _user_hook
from test_redteam_hooks_scripts import _hook, _program

from codemode.hooks.discovery import discover


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


class _Evil:
    """A pickle that runs a shell command as it is read back (``__reduce__``)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


def _plant(path: str, data: str | bytes) -> str:
    """A shell command (for the program) writing ``data`` to ``path``, bytes as they are."""
    raw = data.encode() if isinstance(data, str) else data
    return (
        f"mkdir -p $(dirname {path}) && echo {base64.b64encode(raw).decode()} | base64 -d > {path}"
    )


RAN_OK = "open('ran.txt', 'a').write('ok\\n')\n"
RAN_EVIL = "open('ran.txt', 'a').write('evil\\n'); open('PWNED', 'w')\n"
SHELL_EVIL = "echo evil >> ran.txt; touch PWNED"

# (the script, the workspace's files at first, the file the program rewrites and what
# it writes there: PWNED stands for the marker's path)
PYTHON = {
    "module_alias": (
        'import subprocess as sp\nsp.run(open(".fmtcmd").read(), shell=True)\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", SHELL_EVIL),
    ),
    "call_alias": (
        'from os import system as sh\nsh(open(".fmtcmd").read())\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", SHELL_EVIL),
    ),
    "getattr": (
        'import os\ngetattr(os, "system")(open(".fmtcmd").read())\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", SHELL_EVIL),
    ),
    "partial": (
        "import functools, subprocess\n"
        "sh = functools.partial(subprocess.run, shell=True)\n"
        'sh(open(".fmtcmd").read())\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", SHELL_EVIL),
    ),
    "sys_path_insert": (
        'import sys\nsys.path.insert(0, ".")\nimport lintconf\n',
        {"lintconf.py": RAN_OK},
        ("lintconf.py", RAN_EVIL),
    ),
    "sys_path_append_cwd": (
        "import os, sys\nsys.path.append(os.getcwd())\nimport lintconf  # noqa\n",
        {"lintconf.py": RAN_OK},
        ("lintconf.py", RAN_EVIL),
    ),
    "addsitedir": (
        'import site\nsite.addsitedir(".")\nopen("ran.txt", "a").write("ok\\n")\n',
        {},
        ("hook.pth", f"import os; os.system('{SHELL_EVIL}')"),
    ),
    "plugin_folder": (
        "import importlib.util, pathlib\n"
        'for path in sorted(pathlib.Path("hookplugins").glob("*.py")):\n'
        "    spec = importlib.util.spec_from_file_location(path.stem, path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n",
        {"hookplugins/a.py": RAN_OK},
        ("hookplugins/a.py", RAN_EVIL),
    ),
    "shell_on_stdin": (
        'import subprocess\nsubprocess.run(["sh"], input=open(".fmtcmd").read(), text=True)\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", SHELL_EVIL),
    ),
    "pickle": (
        'import pickle\nstate = pickle.load(open(".hookstate", "rb"))\n'
        'open("ran.txt", "a").write("ok\\n")\n',
        {".hookstate": pickle.dumps({}, protocol=0).decode()},
        (".hookstate", "PICKLE"),
    ),
}

# The same for shell scripts, each run by ``sh`` (``bash`` for a here-string).
CMD = {".fmtcmd": "echo ok >> ran.txt"}, (".fmtcmd", SHELL_EVIL)
# (what no shell reads: its words are a program and its arguments)
WORDS = {".fmtcmd": "touch ok.txt"}, (".fmtcmd", "touch PWNED evil.txt")
SHELL = {
    "bash_lc": ('X=$(cat .fmtcmd)\nbash -lc "$X"\n', *CMD),
    "sh_ec": ('CMD=$(cat .fmtcmd)\nsh -ec "$CMD"\n', *CMD),
    "piped_to_sh": ("cat .fmtcmd | sh\n", *CMD),
    "jq_piped_to_sh": (
        "jq -r .scripts.fmt package.json | sh\n",
        {"package.json": '{"scripts": {"fmt": "echo ok >> ran.txt"}}'},
        ("package.json", json.dumps({"scripts": {"fmt": SHELL_EVIL}})),
    ),
    "redirected_to_sh": ('sh < "$CLAUDE_PROJECT_DIR/.fmtcmd"\n', *CMD),
    "here_string": ('bash <<< "$(cat .fmtcmd)"\n', *CMD),
    "dev_stdin": (
        ". /dev/stdin < .hookenv\n",
        {".hookenv": "echo ok >> ran.txt"},
        (".hookenv", SHELL_EVIL),
    ),
    "env_S": ('env -S "$(cat .fmtcmd)"\n', *WORDS),
    "command_p": ("command -p $(cat .fmtcmd)\n", *WORDS),
    "timeout": ("FMT=$(cat .fmtcmd)\ntimeout 20 $FMT\n", *WORDS),
    "nice": ("nice -n 10 $(cat .fmtcmd)\n", *WORDS),
    "sh_e_variable": (
        'S=$(cat .fmtscript)\nsh -e "$S"\n',
        {".fmtscript": "lint.sh", "lint.sh": "echo ok >> ran.txt"},
        ("lint.sh", SHELL_EVIL),
    ),
    "run_parts": (
        'run-parts "$CLAUDE_PROJECT_DIR/.hooks.d"\n',
        {".hooks.d/fmt": "#!/bin/sh\necho ok >> ran.txt"},
        (".hooks.d/fmt", f"#!/bin/sh\n{SHELL_EVIL}"),
    ),
    "path_first": (
        'PATH="$CLAUDE_PROJECT_DIR/tools/bin:$PATH" shfmtx --version\n',
        {"tools/bin/shfmtx": "#!/bin/sh\necho ok >> ran.txt"},
        ("tools/bin/shfmtx", f"#!/bin/sh\n{SHELL_EVIL}"),
    ),
}


def _attack(home: Path, work: Path, files: dict[str, str], planted: str, evil: str) -> None:
    """The workspace holds ``files``; the program rewrites ``planted``; the hook runs
    before each model request, so once before and once after. What was planted must
    have run, and not on the host."""
    pwned = home / "pwned"
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text + "\n")
        (work / rel).chmod(0o755)
    data: str | bytes = evil.replace("PWNED", str(pwned))
    if evil == "PICKLE":
        data = pickle.dumps(_Evil(SHELL_EVIL.replace("PWNED", str(pwned))), protocol=0)
    run = run_session(home, work, _program(_plant(planted, data)))
    assert run.result.ok, run.notices()
    if "evil.txt" in evil:
        assert (work / "evil.txt").exists(), run.notices()  # (it ran what was planted)
    else:
        assert "evil" in (work / "ran.txt").read_text(), run.notices()
    assert not pwned.exists(), "the trusted hook ran code the program wrote on the host"


@pytest.mark.parametrize("case", sorted(PYTHON))
def test_a_trusted_python_script_running_workspace_code_runs_confined(
    case: str, home: Path, work: Path
) -> None:
    script, files, (planted, evil) = PYTHON[case]
    store = _trusted(home, work, script)
    _attack(home, work, files, planted, evil)
    hook = discover(work, home).hooks[0]
    assert any("fmt.py" in n for n in store.not_covered(hook)), store.not_covered(hook)


@pytest.mark.parametrize("case", sorted(SHELL))
def test_a_trusted_shell_script_running_workspace_code_runs_confined(
    case: str, home: Path, work: Path
) -> None:
    script, files, (planted, evil) = SHELL[case]
    program = "bash" if "<<<" in script else "sh"
    store = _hook(home, work, script, f"{program} .codemode/hooks/fmt.sh")
    _attack(home, work, files, planted, evil)
    hook = discover(work, home).hooks[0]
    assert any("fmt.sh" in n for n in store.not_covered(hook)), store.not_covered(hook)


USER_PYTHON = ["module_alias", "sys_path_insert", "addsitedir", "plugin_folder", "pickle"]
USER_SHELL = [
    *("bash_lc", "piped_to_sh", "redirected_to_sh", "dev_stdin", "timeout"),
    *("run_parts", "path_first"),
]


@pytest.mark.parametrize("case", USER_PYTHON)
def test_a_users_python_script_running_workspace_code_runs_confined(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    """The user's own script (outside the workspace) is read for what it runs: each of
    these runs the workspace's code."""
    script, files, (planted, evil) = PYTHON[case]
    _user_hook(tmp_path, home, work, script, "fmt.py")
    _attack(home, work, files, planted, evil)


@pytest.mark.parametrize("case", USER_SHELL)
def test_a_users_shell_script_running_workspace_code_runs_confined(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    script, files, (planted, evil) = SHELL[case]
    _user_hook(tmp_path, home, work, script)
    _attack(home, work, files, planted, evil)


# Other spellings, read by the same rules (the scan's note, each with a word it names):
# (the script's name, its text, a word of the note)
NOTED = {
    "import_list_alias": (
        "fmt.py",
        "import os, subprocess as sp  # tools\nsp.run(c, shell=True)\n",
        "sp.",
    ),
    "from_import_parenthesised": (
        "fmt.py",
        "from subprocess import (\n    check_output as out,\n    PIPE,\n)\nout(cmd, shell=True)\n",
        "`out(",
    ),
    "pickle_alias": ("fmt.py", "import pickle as pk\nstate = pk.loads(data)\n", "pk.loads"),
    "pickle_imported": ("fmt.py", 'from pickle import load\nload(open(".s", "rb"))\n', "load("),
    "yaml_unsafe_load": ("fmt.py", 'import yaml\nyaml.unsafe_load(open("c.yml"))\n', "unsafe_load"),
    "import_module_alias": ("fmt.py", "from importlib import import_module as im\nim(n)\n", "im("),
    "sys_path_from_env": (
        "fmt.py",
        'import os, sys\nsys.path.append(os.environ["CLAUDE_PROJECT_DIR"])\n',
        "sys.path.append",
    ),
    "sys_path_above_the_script": (
        "fmt.py",
        "import sys\nfrom pathlib import Path\n"
        "sys.path.insert(0, str(Path(__file__).parents[2]))\n",
        "sys.path.insert",
    ),
    "method_passed": ("fmt.py", "import os\nrun = os.system\n", "os.system"),
    "node_destructured": (
        "fmt.js",
        'const { execSync: sh } = require("child_process");\nsh(cmd);\n',
        "`sh(",
    ),
    "node_module_name": (
        "fmt.js",
        'const proc = require("child_process");\nproc.exec(cmd);\n',
        "proc.exec",
    ),
    "node_namespace": (
        "fmt.js",
        'import * as child from "node:child_process";\nchild.spawn(c);\n',
        "child.spawn",
    ),
    "node_promisify": (
        "fmt.js",
        'const cp = require("node:child_process");\nconst run = util.promisify(cp.exec);\n',
        "cp.exec",
    ),
    "process_substitution": ("fmt.sh", ". <(jq -r .env config.json)\n", "variable"),
    "perl_e": ("fmt.sh", 'perl -e "$(cat .x)"\n', "variable"),
    "trap": ("fmt.sh", 'trap "$(cat .cleanup)" EXIT\n', "variable"),
    "find_exec_variable": ("fmt.sh", 'find . -name "*.md" -exec "$FMT" {} +\n', "variable"),
    "sh_s_with_arguments": ("fmt.sh", 'echo "$CMD" | sh -s -- x\n', "pipe"),
}


@pytest.mark.parametrize("case", sorted(NOTED))
def test_other_spellings_of_running_workspace_code_are_noted(
    case: str, home: Path, work: Path
) -> None:
    name, script, word = NOTED[case]
    said = _scanned(home, work, script, name)
    assert any(word in n for n in said), said


# Hooks as people write them, which run nothing a command wrote: they stay on the host,
# the hook's own scripts and the user's alike.
ORDINARY = {
    "own_folder_on_the_path": (
        "fmt.py",
        "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n",
    ),
    "own_folder_pathlib": (
        "fmt.py",
        "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).parent))\n",
    ),
    "aliases_with_literals": (
        "fmt.py",
        "import subprocess as sp\nfrom os import system as sh\n"
        'sp.run(["git", "status"], stdout=sp.DEVNULL)\nsh("git diff --stat")\n',
    ),
    "lists_and_json": (
        "fmt.py",
        "import json, sys\nfrom json import load\ndata = load(sys.stdin)\n"
        "path = []\npath.append(data)\npath.insert(0, 1)\nprint(json.loads('{}'))\n",
    ),
    "popen_annotated": (
        "fmt.py",
        "import subprocess\ndef wait(p: subprocess.Popen[str]) -> None:\n"
        "    assert isinstance(p, subprocess.Popen)\n",
    ),
    "getattr_default": ("fmt.py", 'import os\nuid = getattr(os, "getuid", None)\n'),
    "pickle_written": ("fmt.py", 'import pickle\nopen("/tmp/x", "wb").write(pickle.dumps({}))\n'),
    "literal_shell_and_input": (
        "fmt.py",
        'import subprocess\nsubprocess.run(["bash", "-c", "echo hi"], input="x", text=True)\n',
    ),
    "command_v": ("fmt.sh", 'tool=$(jq -r .tool)\ncommand -v "$tool" >/dev/null || exit 0\n'),
    "wrappers_with_literals": ("fmt.sh", "timeout 20 git status --short\nnice -n 10 git gc\n"),
    "here_document": ("fmt.sh", "bash <<'EOF'\necho hi\nEOF\ncat <<EOF\n{}\nEOF\n"),
    "pipes_to_tools": ("fmt.sh", 'echo "$X" | grep -q foo && echo found\nprintf %s "$x" | jq .\n'),
    "log_redirect": ("fmt.sh", 'exec >>"$HOME/hook.log" 2>&1\nexec 2>/dev/null\n'),
    "path_of_the_user": ("fmt.sh", 'PATH="$HOME/.local/bin:$PATH" shfmt -w "$f"\n'),
}


@pytest.mark.parametrize("case", sorted(ORDINARY))
def test_an_ordinary_hook_still_runs_on_the_host(case: str, home: Path, work: Path) -> None:
    name, script = ORDINARY[case]
    assert _reasons(home, work, script, name) == []


# (a file name with a script's suffix, in a file the trust covers, is a file it may run)
USERS_ORDINARY = {
    **ORDINARY,
    "find_here": ("fmt.sh", 'find . -name "*.sh" -exec shellcheck {} +\n'),
}


@pytest.mark.parametrize("case", sorted(USERS_ORDINARY))
def test_an_ordinary_users_script_still_runs_on_the_host(
    case: str, tmp_path: Path, home: Path, work: Path
) -> None:
    name, script = USERS_ORDINARY[case]
    assert _user_reasons(tmp_path, home, work, script, name) == []


def test_an_ordinary_hook_runs_on_the_host_end_to_end(home: Path, work: Path) -> None:
    """Only a hook run outside the sandbox can write in codemode's home: what this round
    added must leave such a hook there."""
    mark = home / "ran-on-host"
    script = (
        "import json, os, subprocess as sp, sys\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
        "json.load(sys.stdin)\n"
        'sp.run(["git", "--version"], stdout=sp.DEVNULL)\n'
        f"open({str(mark)!r}, 'w').write('yes')\n"
    )
    _trusted(home, work, script)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok, run.notices()
    assert mark.read_text() == "yes", run.notices()
