"""The host-side launcher, from the attacker's side: a program a confined command of
this or an *earlier* session planted is never what codemode runs outside the sandbox
(the batch driver's git, doctor's node, an MCP server from config), and a repository's
git config names no program the driver runs (``--push``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless
from test_batch import interp, read_report
from test_batch_changes import git, make_repo

__all__ = ["shared_dir"]  # a fixture

PLANT = ("mkdir -p bin && printf '#!/bin/sh\\necho planted >> {marker}\\n"
         "exec /usr/bin/{name} \"$@\"\\n' > bin/{name} && chmod 755 bin/{name} && echo ok")


def _plant(user: str, shared: Path, name: str) -> tuple[Path, Path, dict[str, str]]:
    """A session in ``ws`` whose confined command writes ``ws/bin/NAME``; returns the
    workspace, the marker the planted program would touch, and an environment for a
    *later* process (same codemode home, the planted folder first on PATH)."""
    ws = shared / "ws"
    ws.mkdir()
    (shared / "codemode-home").mkdir()  # the user's own codemode home
    give(ws, user)
    give(shared / "codemode-home", user)
    marker = shared / "planted-ran"
    result = run_shell(user, ws, PLANT.format(marker=marker, name=name),
                       sandbox_mode="workspace-write")
    assert (ws / "bin" / name).exists(), result
    env = {**os.environ, "CODEMODE_HOME": str(shared / "codemode-home"),
           "PATH": f"{ws / 'bin'}:{os.environ['PATH']}"}
    return ws, marker, env


def test_the_batch_driver_does_not_run_a_git_an_earlier_session_planted(
    shared_dir: Path, user: str
) -> None:
    skip_unless(user)
    _, marker, env = _plant(user, shared_dir, "git")
    repos = shared_dir / "repos"
    make_repo(repos / "r", {"v.txt": "1\n"})
    (shared_dir / "bump.js").write_text(
        'await tools.write_file({path: "v.txt", content: "2\\n"});\n')
    proc = interp("run", "bump.js", "--repos", "repos", "--branch", "bump", "--commit-message",
                  "Bump", "--author", "Bot <bot@example.com>", "--report", "r.jsonl",
                  cwd=shared_dir, env=env)
    assert proc.returncode == 0, proc.stderr
    assert read_report(shared_dir / "r.jsonl")["r"]["branch"] == "bump"
    assert not marker.exists(), "the driver ran the planted git"


def test_doctor_does_not_run_a_node_an_earlier_session_planted(
    shared_dir: Path, user: str
) -> None:
    skip_unless(user)
    _, marker, env = _plant(user, shared_dir, "git")
    # node may be missing here: the planted one stands in for it by name.
    planted = shared_dir / "ws" / "bin"
    (planted / "git").rename(planted / "node")
    proc = interp("doctor", "--json", cwd=shared_dir, env=env)
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert not marker.exists(), "doctor ran the planted node"


def test_an_mcp_server_in_a_folder_commands_wrote_is_refused_by_name(
    shared_dir: Path, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_unless(user)
    ws, marker, env = _plant(user, shared_dir, "git")
    monkeypatch.setenv("CODEMODE_HOME", env["CODEMODE_HOME"])
    from codemode.mcp.config import McpServerConfig
    from codemode.mcp.connection import McpServerError, ServerConnection

    conn = ServerConnection("planted", McpServerConfig(command=str(ws / "bin" / "git")),
                            shared_dir / "logs")

    async def start() -> str:
        try:
            await conn.ensure()
        except McpServerError as exc:
            return str(exc)
        return "started"

    said = asyncio.run(start())
    assert not marker.exists(), "the planted program was started as an MCP server"
    assert str(ws / "bin" / "git") in said and "could have written" in said, said


def test_a_shell_string_names_its_scripts_and_a_refusal_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.locations import launcher

    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "scripts").mkdir(parents=True)
    (ws / "scripts" / "fmt.sh").write_text("echo hi\n")
    (ws / "guard.sh").write_text("echo hi\n")
    named = launcher.named_files(["/bin/sh", "-c", "sh scripts/fmt.sh && ./guard.sh | cat"], ws)
    assert named[-2:] == [str(ws / "scripts" / "fmt.sh"), str(ws / "guard.sh")]
    from codemode.locations import host_programs

    token = host_programs.register_roots([ws])
    try:
        with pytest.raises(launcher.LaunchRefused, match=r"fmt\.sh lies in .*could have written"):
            launcher.resolve(["sh", "scripts/fmt.sh"], cwd=ws)
        ok = {str(ws / "scripts" / "fmt.sh"): launcher.digest(ws / "scripts" / "fmt.sh")}
        assert launcher.resolve(["sh", "scripts/fmt.sh"], cwd=ws, trusted=ok)[0].endswith("/sh")
        (ws / "scripts" / "fmt.sh").write_text("echo changed\n")
        with pytest.raises(launcher.LaunchRefused, match=r"fmt\.sh changed since it was trusted"):
            launcher.resolve(["sh", "scripts/fmt.sh"], cwd=ws, trusted=ok)
        # PATH handed on keeps no entry a command could have filled, and none relative.
        env = launcher.safe_env({"PATH": f"{ws}/bin:bin:/usr/bin"})
        assert env["PATH"] == "/usr/bin"
    finally:
        host_programs.unregister_roots(token)
    # Recorded for later sessions: a fresh registry still refuses it.
    assert str(ws.resolve()) in (tmp_path / "home" / "writable-roots").read_text().split("\n")


# --- git in the driver: the repository's config names no program -------------------------

# key -> value; each would run the marker script were git to obey it on --push.
PROGRAM_KEYS = {
    "remote.origin.receivepack": "{hook}",
    "remote.origin.uploadpack": "{hook}",
    "core.fsmonitor": "{hook}",
    "core.sshCommand": "{hook}",
    "filter.x.clean": "{hook}",
    "filter.x.smudge": "{hook}",
    "filter.x.process": "{hook}",
    "core.hooksPath": "{hooks_dir}",
    "credential.helper": "!{hook}",
    "core.askPass": "{hook}",
    "gpg.program": "{hook}",
    "include.path": "{include}",
}


@pytest.mark.parametrize("key", sorted(PROGRAM_KEYS))
def test_push_runs_no_program_the_repositorys_config_names(tmp_path: Path, key: str) -> None:
    marker = tmp_path / "config-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\necho {key} >> {marker}\nexit 1\n")
    hook.chmod(0o755)
    hooks_dir = tmp_path / "hooks"
    hooks_dir.mkdir()
    for name in ("pre-push", "pre-commit", "post-checkout", "reference-transaction",
                 "post-index-change"):
        (hooks_dir / name).write_text(f"#!/bin/sh\necho {key} >> {marker}\n")
        (hooks_dir / name).chmod(0o755)
    include = tmp_path / "included"
    include.write_text(f"[core]\n\tfsmonitor = {hook}\n"
                       f"[remote \"origin\"]\n\treceivepack = {hook}\n")
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n", ".gitattributes": "* filter=x\n"})
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    if key == "core.sshCommand":
        git(repo, "config", "remote.origin.pushurl", "ssh://example.invalid/r.git")
    value = PROGRAM_KEYS[key].format(hook=hook, hooks_dir=hooks_dir, include=include)
    git(repo, "config", key, value)
    (tmp_path / "bump.js").write_text('await tools.write_file({path: "v.txt", content: "2\\n"});\n')
    env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
    proc = interp("run", "bump.js", "--repos", "repos", "--branch", "bump", "--commit-message",
                  "Bump", "--author", "Bot <bot@example.com>", "--push", "origin", "--report",
                  "r.jsonl", cwd=tmp_path, env=env)
    assert not marker.exists(), f"git ran what {key} names: {marker.read_text()}"
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["status"] == "failed" and line["error_kind"] == "publish", line
    assert key.lower() in line["error"].lower() or "include" in line["error"], line["error"]
    assert "names a program" in line["error"] or "not one git" in line["error"], line["error"]
    # Nothing was published: the repository is as it was.
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert (repo / "v.txt").read_text() == "1\n"
    assert proc.returncode == 1, proc.stderr


def test_diff_runs_no_filter_the_repositorys_config_names(tmp_path: Path) -> None:
    """/diff runs git on the host: a clean filter the repository's own config defines
    (``git diff HEAD`` would run it on every changed file) makes it decline instead."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from codemode.tui.commands import COMMANDS

    marker = tmp_path / "filter-ran"
    repo = make_repo(tmp_path / "repo", {"v.txt": "1\n", ".gitattributes": "* filter=x\n"})
    git(repo, "config", "filter.x.clean", f"sh -c 'touch {marker}; cat'")
    (repo / "v.txt").write_text("2\n")
    out = io.StringIO()
    app = SimpleNamespace(cwd=repo, console=Console(file=out, width=200),
                          renderer=SimpleNamespace(flush_streams=lambda: None),
                          snapshots=SimpleNamespace(turns=[]))
    asyncio.run(COMMANDS["/diff"].run(app, ""))  # type: ignore[arg-type]
    assert not marker.exists(), "git ran the repository's clean filter"
    said = out.getvalue()
    assert "filter.x.clean" in said and "does not run git here" in said, said
