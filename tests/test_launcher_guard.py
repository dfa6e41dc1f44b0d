"""Every program codemode starts outside the sandbox goes through one door
(``codemode.locations.launcher``): a start anywhere else in ``codemode/`` fails here,
unless it is on the list below, each with why it is not a host-side start of something a
command could have shaped."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "codemode"

# module (relative to codemode/) -> why its starts do not go through the launcher.
ALLOWED = {
    "locations/launcher.py": "the launcher itself",
    "sandbox/server/pidfd_process.py":
        "starts the confined command: its argv is bubblewrap or the Landlock set-up, built "
        "by the confinement machinery from programs host_programs found",
    "sandbox/server/command_server.py":
        "the command server runs inside the confinement it was started in; what it starts "
        "is the confined command",
    "sandbox/unconfined.py":
        "the danger-full-access backend: the person chose to run commands unconfined; the "
        "command is the model's, decided by policy and approval, not a program codemode "
        "picks",
    "js_runtime/prestart.py":
        "codemode's own interpreter (sys.executable -I -S: its installation, kept "
        "read-only to commands) as the engine worker, confined by seccomp",
    "warm/start.py":
        "codemode's own interpreter (sys.executable, its installation, kept read-only to "
        "commands) started as this user's warm server",
    "eval/tasks/find_the_bug/verify.py":
        "an eval task's checker, run by the eval harness in the task's own scratch copy",
    "eval/tasks/renamed_setting/verify.py":
        "an eval task's checker, run by the eval harness in the task's own scratch copy",
}

_STARTS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput",
                   "getstatusoutput"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "os": {"system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp",
           "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp",
           "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"},
}  # fmt: skip


def _starts(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    imported: dict[str, str] = {}  # a name imported from a module: from subprocess import run
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _STARTS:
            for alias in node.names:
                if alias.name in _STARTS[node.module]:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in imported:
            found.append((node.lineno, imported[f.id]))
        elif isinstance(f, ast.Attribute):
            base = f.value
            # subprocess.run, asyncio.subprocess..., os.execv
            if isinstance(base, ast.Name) and f.attr in _STARTS.get(base.id, ()):
                found.append((node.lineno, f"{base.id}.{f.attr}"))
            elif (isinstance(base, ast.Attribute) and base.attr == "subprocess"
                  and f.attr in _STARTS["asyncio"] | _STARTS["subprocess"]):
                found.append((node.lineno, f"....subprocess.{f.attr}"))
    return found


def test_no_program_starts_outside_the_launcher() -> None:
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        for line, what in _starts(ast.parse(path.read_text(encoding="utf-8"))):
            stray.append(f"codemode/{rel}:{line}: {what}")
    assert not stray, "programs started outside codemode.locations.launcher:\n" + "\n".join(stray)


def test_every_allowed_module_still_starts_something() -> None:
    """A stale entry would let a new start slip in unseen."""
    for rel in ALLOWED:
        assert _starts(ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))), rel


def test_the_guard_sees_each_spelling(tmp_path: Path) -> None:
    source = ("import subprocess, os, asyncio\nfrom subprocess import Popen as P\n"
              "subprocess.run(['x'])\nP(['x'])\nos.posix_spawn('x', [], {})\n"
              "os.execv('x', [])\nasyncio.create_subprocess_exec('x')\n")
    assert [w for _, w in _starts(ast.parse(source))] == [
        "subprocess.run", "subprocess.Popen", "os.posix_spawn", "os.execv",
        "asyncio.create_subprocess_exec"]
