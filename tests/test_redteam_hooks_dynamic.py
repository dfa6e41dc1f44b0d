"""A trusted hook script that runs a command, or evaluates code, that it reads from the
workspace as it runs: ``os.system(open(".fmtcmd").read())``, ``subprocess.run(
json.load(open("package.json"))["scripts"]["fmt"], shell=True)``, ``exec(open(
".hookrc").read())``, Node's ``execSync(fs.readFileSync("cmd.txt"))``. The trust
covers the script, not the file it reads, which a confined command can rewrite: such a
hook runs in the session's sandbox (``codemode.hooks.script_runs``: a call that starts a
program or evaluates code whose argument is not a literal is "a program named only by a
variable", as ``$CMD`` is in a shell script; docs/threat-model.md, family 2). Evidence
of an escape, end to end, is a file in codemode's home, which no confined command may
write. Real sessions, sandboxes and hook processes; the scripted model stands in for the
model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hooks_support import confined_reasons, hooks_table, run_session, write_hooks
from test_redteam_hooks_scripts import _program, _put

from codemode.hooks import script_scan
from codemode.hooks.discovery import discover
from codemode.hooks.process import argv_for, project_env
from codemode.hooks.trust import TrustStore
from codemode.locations import launcher


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _trusted(home: Path, work: Path, script: str, name: str = "fmt.py") -> TrustStore:
    """``.codemode/hooks/NAME`` holding ``script``, run by its interpreter before each
    model request (the user's hook), trusted with its files."""
    folder = work / ".codemode" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(script)
    program = {".py": "python3", ".js": "node"}.get(Path(name).suffix, "sh")
    command = f"{program} .codemode/hooks/{name}"
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", command))
    store = TrustStore(home, work)
    store.trust(discover(work, home).hooks)
    return store


def _reasons(home: Path, work: Path, script: str, name: str = "fmt.py") -> list[str]:
    """Why the hook runs confined, as the engine decides it (its command's programs,
    then what its trusted scripts start); empty: it runs on the host."""
    store = _trusted(home, work, script, name)
    return confined_reasons(home, work, store)


def _pwned(home: Path) -> Path:
    return home / "pwned"


# (the hook's script, the workspace's files at first, the file the program rewrites and
# what it writes there: PWNED stands for the marker's path)
PYTHON_HOOKS = {
    "os_system_variable": (
        'import os\ncmd = open(".fmtcmd").read()\nos.system(cmd)\n',
        {".fmtcmd": "echo ok >> ran.txt"},
        (".fmtcmd", "touch PWNED; echo evil >> ran.txt"),
    ),
    "subprocess_split": (
        'import subprocess\nsubprocess.run(open("tools.txt").read().split())\n',
        {"tools.txt": "sh -c true"},
        ("tools.txt", "touch PWNED evil.txt"),
    ),
    "package_json_shell": (
        "import json, subprocess\n"
        "subprocess.run(\n"
        '    json.load(open("package.json"))["scripts"]["fmt"], shell=True\n'
        ")\n",
        {"package.json": '{"scripts": {"fmt": "echo ok >> ran.txt"}}'},
        ("package.json", '{"scripts": {"fmt": "touch PWNED; echo evil >> ran.txt"}}'),
    ),
    "exec_read": (
        'exec(open(".hookrc").read())\n',
        {".hookrc": "open('ran.txt', 'a').write('ok\\n')"},
        (".hookrc", "open('ran.txt', 'a').write('evil\\n'); open('PWNED', 'w')"),
    ),
    "runpy_named_by_a_file": (
        'import runpy\nrunpy.run_path(open(".hookconf").read().strip())\n',
        {".hookconf": "lintconf", "lintconf": "open('ran.txt', 'a').write('ok\\n')"},
        ("lintconf", "open('ran.txt', 'a').write('evil\\n'); open('PWNED', 'w')"),
    ),
    "popen_concat": (
        'import os\ntool = open(".fmtcmd").read().strip()\nos.popen(tool + " --fix").read()\n',
        {".fmtcmd": "echo ok >> ran.txt; true"},
        (".fmtcmd", "touch PWNED; echo evil >> ran.txt; true"),
    ),
}


@pytest.mark.parametrize("case", sorted(PYTHON_HOOKS))
def test_a_trusted_python_hook_running_a_command_it_reads_from_the_workspace_runs_confined(
    case: str, home: Path, work: Path
) -> None:
    """The trusted script runs what a workspace file says; the program rewrites that
    file. The next run of the hook runs the new command, in the sandbox."""
    script, files, (planted, evil) = PYTHON_HOOKS[case]
    for rel, text in files.items():
        (work / rel).write_text(text + "\n")
    store = _trusted(home, work, script)
    run = run_session(home, work, _program(_put(planted, evil.replace("PWNED", str(_pwned(home))))))
    assert run.result.ok, run.notices()
    if "evil.txt" in evil:
        assert (work / "evil.txt").exists(), run.notices()  # (it ran, with what was planted)
    else:
        assert (work / "ran.txt").read_text() == "ok\nevil\n", run.notices()
    assert not _pwned(home).exists(), (
        "a command the trusted hook read from the workspace ran on the host"
    )
    # (and the person trusting it was told why)
    hook = discover(work, home).hooks[0]
    assert any("fmt.py" in n for n in store.not_covered(hook)), store.not_covered(hook)


def _scanned(home: Path, work: Path, script: str, name: str = "fmt.py") -> list[str]:
    """What the scan of the hook's trusted scripts says (the command's own program
    left aside: ``node`` is a project tool by its name already)."""
    store = _trusted(home, work, script, name)
    hook = discover(work, home).hooks[0]
    env = project_env(os.environ, work)
    named = launcher.named_files(argv_for(hook.command), work, env)
    return script_scan.scan(named, store.trusted_files(hook), work, env).reasons


# Calls whose program or code only the running script knows, each with a word its note
# names. The first kind runs on the host without the rule above (end to end, above);
# these are the rest of the calls the rule knows.
DYNAMIC_CALLS = {
    "import_module": (
        'import importlib, json\nimportlib.import_module(json.load(open("c.json"))["m"])\n',
        "import_module",
    ),
    "dunder_import": ("mod = __import__(open('.mod').read().strip())\n", "__import__"),
    "eval": ('print(eval(open(".expr").read()))\n', "eval"),
    "compile": ('code = compile(open(".hookrc").read(), "rc", "exec")\n', "compile"),
    "pty_spawn": ("import pty\npty.spawn(open('.tty').read().split())\n", "spawn"),
    "os_spawnvp": (
        "import os\nargv = open('.cmd').read().split()\nos.spawnvp(os.P_WAIT, argv[0], argv)\n",
        "spawnvp",
    ),
    "os_execvp": (
        "import os\nargv = open('.cmd').read().split()\nos.execvp(argv[0], argv)\n",
        "execvp",
    ),
    "from_import_run": (
        "from subprocess import run\nrun(open('.cmd').read(), shell=True)\n",
        "run",
    ),
    "popen_list_sh_c": (
        "import subprocess\nsubprocess.Popen(['sh', '-c', open('.cmd').read()])\n",
        "Popen",
    ),
    "check_output_keyword": (
        "import subprocess\nsubprocess.check_output(args=CMD)\n",
        "check_output",
    ),
    "asyncio_shell": (
        "import asyncio\nasyncio.create_subprocess_shell(cmd)\n",
        "create_subprocess_shell",
    ),
    "runpy_module": ("import runpy\nrunpy.run_module(name)\n", "run_module"),
}
NODE_CALLS = {
    "execSync_readFileSync": (
        'const cp = require("child_process");\n'
        'const fs = require("fs");\n'
        'cp.execSync(fs.readFileSync("cmd.txt", "utf8"));\n',
        "execSync",
    ),
    "require_variable": (
        'const plugin = JSON.parse(require("fs").readFileSync("p.json")).name;\nrequire(plugin);\n',
        "require",
    ),
    "dynamic_import": ("const name = process.argv[2];\nawait import(name);\n", "import"),
    "spawn_template": (
        'const { spawn } = require("child_process");\nspawn(`${tool}`, ["--fix"]);\n',
        "spawn",
    ),
    "exec_concat": ('require("child_process").exec(tool + " --fix");\n', "exec"),
    "execFile": ('require("child_process").execFile(bin, ["."]);\n', "execFile"),
    "fork": ('require("child_process").fork(script);\n', "fork"),
    "new_Function": ("new Function(src)();\n", "Function"),
    "eval": ("eval(fs.readFileSync('.rc', 'utf8'));\n", "eval"),
}


@pytest.mark.parametrize("case", sorted(DYNAMIC_CALLS))
def test_a_python_call_whose_program_or_code_is_not_a_literal_confines_the_hook(
    case: str, home: Path, work: Path
) -> None:
    script, word = DYNAMIC_CALLS[case]
    said = _scanned(home, work, script)
    assert any(f"{word}(…)`" in n for n in said), said


@pytest.mark.parametrize("case", sorted(NODE_CALLS))
def test_a_node_call_whose_program_or_code_is_not_a_literal_confines_the_hook(
    case: str, home: Path, work: Path
) -> None:
    """A Node hook runs confined by its program's name already (``node`` loads the
    workspace's node_modules), so these read the scan alone: a Node file of a covered
    folder is read by the same rule, whatever starts it."""
    script, word = NODE_CALLS[case]
    said = _scanned(home, work, script, "fmt.js")
    assert any(f"{word}(…)`" in n for n in said), said


# Hooks as people write them, which start nothing the workspace chose: they run on the
# host (the rule reads the program's argument, not the mere call).
ORDINARY = {
    "subprocess_literal_list": (
        'import subprocess\nsubprocess.run(["git", "diff", "--stat"], check=False)\n'
    ),
    "subprocess_list_variable_argument": (
        "import json, subprocess, sys\n"
        'path = json.load(sys.stdin)["tool_input"]["file_path"]\n'
        'subprocess.run(["git", "add", path])\n'
    ),
    "os_system_literal": 'import os\nos.system("git status --short")\n',
    "fstring_program_literal": 'import os, sys\nf = sys.argv[1]\nos.system(f"git add {f}")\n',
    "multiline_literal": (
        "import subprocess\n"
        "subprocess.run(\n"
        "    [\n"
        '        "git",  # the program\n'
        '        "diff",\n'
        "    ],\n"
        "    check=True,\n"
        ")\n"
    ),
    "answer_json": (
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        "print(json.dumps({}))\n"
        'print(json.dumps({"decision": "block", "reason": data["prompt"]}))\n'
        "sys.exit(0)\n"
    ),
    "regex_and_asyncio": (
        "import asyncio, re\n"
        'PATTERN = r"rm -rf"\n'
        "bad = re.compile(PATTERN)\n"
        "async def main():\n"
        "    return None\n"
        "asyncio.run(main())\n"
    ),
    "own_function_named_run": 'def run(cmd):\n    return cmd\nprint(run(["x"]))\n',
    "executable_isolated": (
        'import subprocess, sys\nsubprocess.run([sys.executable, "-I", "-c", "print(1)"])\n'
    ),
    "literal_eval": "import ast, sys\nprint(ast.literal_eval(sys.stdin.read()))\n",
}


@pytest.mark.parametrize("case", sorted(ORDINARY))
def test_an_ordinary_python_hook_still_runs_on_the_host(case: str, home: Path, work: Path) -> None:
    assert _reasons(home, work, ORDINARY[case]) == []


def test_an_ordinary_python_hook_runs_on_the_host_end_to_end(home: Path, work: Path) -> None:
    """The hook writes a file in codemode's home, which only a hook run outside the
    sandbox can: what the rule adds must leave such a hook there."""
    mark = home / "ran-on-host"
    script = (
        "import json, subprocess, sys\n"
        "json.load(sys.stdin)\n"
        'subprocess.run(["git", "--version"], stdout=subprocess.DEVNULL)\n'
        f"open({str(mark)!r}, 'w').write('yes')\n"
    )
    _trusted(home, work, script)
    run = run_session(home, work, [{"text": "answered"}])
    assert run.result.ok, run.notices()
    assert mark.read_text() == "yes", run.notices()


def test_a_script_with_more_calls_than_are_read_says_so_and_is_confined(
    home: Path, work: Path
) -> None:
    """Each call's argument is read up to a bound, and the calls of a file up to a
    multiple of its size: unclosed quotes after every call (a minified bundle in the
    hook's folder) would have each read to the bound. The rest is not read, and the
    note says so."""
    said = _scanned(home, work, 'exec("""x\n' * 20_000)
    assert any("more calls than are read" in n for n in said), said[-3:]
