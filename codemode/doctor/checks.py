"""``interpreter doctor``: where user data lives, and whether this machine has what the
agent needs. Every check that finds something missing says how to fix it.

Only reads and probes: it never creates a file or changes a setting.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
from pathlib import Path

from codemode.doctor.provider_checks import provider_keys
from codemode.doctor.report import Report, Status
from codemode.locations import launcher
from codemode.locations.host_programs import host_program

RULES_DIR = "rules"
SESSIONS_DIR = "sessions"
MIN_NODE_MAJOR = 18

# --- user data -------------------------------------------------------------------------


def _count(directory: Path, pattern: str) -> int:
    try:
        return sum(1 for _ in directory.glob(pattern))
    except OSError:
        return 0


def user_data(report: Report, cwd: Path) -> None:
    from codemode.agent.instructions import DOC_NAME, project_docs, repository_root
    from codemode.config import CONFIG_FILE, ConfigError, codemode_home, load_config
    from codemode.skills.discovery import discover_skills

    home = codemode_home()
    where = "$CODEMODE_HOME" if os.environ.get("CODEMODE_HOME") else "default"
    report.add("data", "home", "info", f"{home} ({where}; set CODEMODE_HOME to move it)")

    config_path = home / CONFIG_FILE
    try:
        config = load_config()
    except ConfigError as exc:
        report.add("data", "config", "error", str(exc), f"edit {config_path}")
        config = None
    else:
        state = "found" if config_path.is_file() else "not created yet (defaults apply)"
        report.add("data", "config", "ok", f"{config_path}: {state}")

    rules = [home / RULES_DIR, cwd / ".codemode" / RULES_DIR]
    for directory in rules:
        n = _count(directory, "*.rules")
        label = "rules (user)" if directory == rules[0] else "rules (repo)"
        report.add("data", label, "info", f"{directory}: {n} .rules file{'s' if n != 1 else ''}")

    sessions = home / SESSIONS_DIR
    n = _count(sessions, "*.jsonl")
    report.add("data", "sessions", "info", f"{sessions}: {n} recorded")
    _written_roots(report, cwd)

    skills = discover_skills(cwd)
    for directory, scope in skills.searched:
        found = [s for s in skills.skills if s.directory.parent == directory]
        state = f"{len(found)} skill{'s' if len(found) != 1 else ''}" if directory.is_dir() else (
            "none (folder absent)"
        )
        report.add("data", f"skills ({scope})", "info", f"{directory}: {state}")
    for problem in skills.problems:
        report.add(
            "data", "skills", "warn", f"{problem.path}: {problem.message}",
            f"fix the front matter of {problem.path} (name and description)",
        )

    max_chars = config.project_doc_max_chars if config else 32_000
    docs = project_docs(cwd, home, max_chars)
    root = repository_root(cwd.resolve())
    if docs:
        for label, text in docs:
            report.add("data", "AGENTS.md", "ok", f"{label} ({len(text)} characters)")
    else:
        report.add(
            "data", "AGENTS.md", "info",
            f"none found (looked in {home / DOC_NAME} and from {root or cwd} down to {cwd})",
        )


def _written_roots(report: Report, cwd: Path) -> None:
    """The folders commands of earlier sessions could write, which codemode runs no
    program from (``locations.written_roots``): how many, and how to trust one again."""
    from codemode.locations import written_roots
    from codemode.locations.host_programs import writable_root_of

    record = written_roots.record_path()
    roots = written_roots.recorded()
    try:
        size = record.stat().st_size
    except OSError:
        report.add("data", "written roots", "info", f"{record}: none recorded yet")
        return
    mine = writable_root_of(str(cwd), roots) is not None
    report.add(
        "data", "written roots", "info",
        f"{record}: {len(roots)} folder{'s' if len(roots) != 1 else ''} that commands of "
        f"earlier sessions could write ({size} bytes), codemode runs no program from "
        f"under them{'; this folder is one' if mine else ''}. To trust one again once "
        "you have checked it, remove its line from that file",
    )  # fmt: skip


# --- environment -----------------------------------------------------------------------


def _run(argv: list[str], timeout: float = 10) -> tuple[int, str]:
    try:
        proc = launcher.run(argv, capture_output=True, text=True, timeout=timeout,
                            names_files=False)  # (doctor's own probes: no file to vouch for)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def bubblewrap(report: Report) -> None:
    exe = host_program("bwrap")
    if exe is None:
        report.add(
            "environment", "bubblewrap", "warn", "bwrap not found: shell commands cannot be "
            "confined (read-only and workspace-write sandbox modes)",
            "install it: sudo apt-get install bubblewrap (Fedora: sudo dnf install bubblewrap)",
        )
        return
    code, out = _run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net",
                      "--die-with-parent", "--", "true"])
    if code != 0:
        report.add(
            "environment", "bubblewrap", "warn", f"{exe} is installed but cannot create a "
            f"sandbox here: {out.splitlines()[-1] if out else 'failed'}",
            "allow unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1"
            " (Ubuntu 24.04+: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0); "
            "in a container, run it with --privileged or a seccomp profile allowing clone",
        )
        return
    report.add("environment", "bubblewrap", "ok", f"{exe} works")


def seccomp(report: Report) -> None:
    lib = ctypes.util.find_library("seccomp")
    if lib is None:
        report.add(
            "environment", "seccomp", "warn", "libseccomp not found: network and ptrace "
            "system calls cannot be filtered",
            "install it: sudo apt-get install libseccomp2 (Fedora: sudo dnf install libseccomp)",
        )
        return
    try:
        # lazy: whether libseccomp loads is the check
        import pyseccomp  # noqa: F401
    except ImportError:
        report.add(
            "environment", "seccomp", "warn", f"{lib} found, but the pyseccomp module is not "
            "installed in this Python", "install it into codemode's Python: pip install pyseccomp",
        )
        return
    report.add("environment", "seccomp", "ok", f"{lib} with pyseccomp")


def landlock(report: Report) -> None:
    """Asks the kernel itself (landlock_create_ruleset), as the confinement backend does:
    the LSM list in securityfs is often not mounted (containers), and says nothing then."""
    from codemode.sandbox.confinement import landlock as kernel

    if kernel.available() is None:
        report.add("environment", "landlock", "ok", f"works (ABI {kernel.abi_version()})")
        return
    try:
        lsms = Path("/sys/kernel/security/lsm").read_text().strip().split(",")
    except OSError:
        lsms = []
    listed = f" (LSMs: {', '.join(lsms)})" if lsms else ""
    report.add(
        "environment", "landlock", "info", f"not available here{listed}; "
        "bubblewrap still confines writes",
        "optional: Linux 5.13+ booted with lsm=landlock,...",
    )


def confinement(report: Report) -> None:
    """The same promises as `interpreter policy confinement`, for each working backend."""
    from codemode.sandbox.confinement.confine import probe
    from codemode.sandbox.confinement.promises import promises

    found = probe()
    in_use = "bubblewrap" if found.bubblewrap is None else "landlock"
    for backend in ("bubblewrap", "landlock"):
        if getattr(found, backend) is not None:
            continue
        for p in promises():
            why = getattr(p, backend)
            if why is None:
                report.add("confinement", f"{backend}: {p.key}", "ok", p.text)
            else:
                # a gap of the fallback only matters when the fallback is in use
                status: Status = "warn" if backend == in_use else "info"
                report.add("confinement", f"{backend}: {p.key}", status,
                           f"not kept: {p.text} — {why}",
                           "install bubblewrap (apt-get install bubblewrap)"
                           if backend == "landlock" else None)


def node(report: Report) -> None:
    exe = host_program("node")
    npx = host_program("npx")
    if exe is None:
        report.add(
            "environment", "node", "warn", "node not found: MCP servers started with npx or "
            "node will not run", f"install Node.js {MIN_NODE_MAJOR} or newer "
            "(https://nodejs.org, or sudo apt-get install nodejs npm)",
        )
        return
    code, out = _run([exe, "--version"])
    version = out.lstrip("v")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        major = 0
    if code != 0 or major < MIN_NODE_MAJOR:
        report.add(
            "environment", "node", "warn", f"{exe} is {out or 'not runnable'}; MCP servers "
            f"usually need Node.js {MIN_NODE_MAJOR}+", f"upgrade Node.js to {MIN_NODE_MAJOR}+",
        )
        return
    extra = "" if npx else " (npx missing: install npm for npx-launched MCP servers)"
    report.add("environment", "node", "ok" if npx else "warn", f"{exe} v{version}{extra}",
               None if npx else "install npm: sudo apt-get install npm")


def engines(report: Report) -> None:
    import asyncio
    import sys

    from codemode.js_runtime import CodeSession, Completed  # lazy: the engines, for this only

    report.add("environment", "python", "info", f"{sys.version.split()[0]} ({sys.executable})")
    for engine, label in (("quickjs", "quickjs-ng"), ("v8", "V8 (mini-racer)")):
        # Run a program: an engine that imports but cannot run (a mini-racer whose C
        # API moved, a broken wheel) fails here rather than in a session.
        session = CodeSession(_NoTools(), engine=engine, persistent=False)
        problem: object
        try:
            outcome = asyncio.run(session.execute("return 6 * 7"))
            assert isinstance(outcome, Completed)  # no yield time: it ran to its end
            value, error = outcome.result.value, outcome.error
            problem = None if value == 42 else (error.one_line() if error else value)
        except Exception as exc:  # a broken wheel raises more than ImportError
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            session.close_now()
        if problem is None:
            report.add("environment", label, "ok", f"runs programs{_engine_version(engine)}")
        else:
            report.add("environment", label, "error", f"cannot run a program: {problem}",
                       "reinstall codemode: pip install --force-reinstall codemode")


class _NoTools:
    """The engine check's delegate: its program calls no tool."""

    async def call_tool(self, call: object) -> object:
        raise RuntimeError("the engine check calls no tool")

    def notify(self, cell_id: str, event: object) -> None:
        pass


def _engine_version(engine: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    package = {"quickjs": "quickjs-ng", "v8": "mini-racer"}[engine]
    try:
        return f" ({package} {version(package)})"
    except PackageNotFoundError:
        return ""


def run_checks(cwd: Path) -> Report:
    """Every check, in the order they are printed."""
    cwd = cwd.resolve()
    report = Report()
    user_data(report, cwd)
    bubblewrap(report)
    seccomp(report)
    landlock(report)
    node(report)
    engines(report)
    confinement(report)
    provider_keys(report)
    return report
