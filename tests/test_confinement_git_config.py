"""Git's effective configuration is protected, not its file names (issue 26, item 3).

Each attack is the red team's: concurrent commands, an uninitialised submodule, the
user's config naming work-tree files (``core.hooksPath``, ``include.path``), the user's
own ``git config`` renaming a new file over ``.git/config`` while a command runs, a
``.git/hooks`` that is a symlink into the work tree. Afterwards git runs on the host the
way the user runs it, and nothing the command chose may run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless
from test_confinement_git import HOOK, git, host_git_runs_nothing, make_repo

from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry

__all__ = ["shared_dir"]

MODES = {
    "bwrap-server": {"backend": "bubblewrap", "command_server": True},
    "bwrap-alone": {"backend": "bubblewrap", "command_server": False},
    "landlock": {"backend": "landlock"},
}


def _skip(mode: str, user: str = "self") -> dict[str, Any]:
    settings = MODES[mode]
    skip_unless(user, str(settings["backend"]))
    return dict(settings)


class Session:
    """Shell calls through one in-process session (for commands that run at once)."""

    def __init__(self, ws: Path, settings: dict[str, Any]) -> None:
        self.s = SandboxSession(ws, SandboxSettings(approval_policy="never", **settings))
        self.ctx = ToolContext(workspace=ws, sandbox=self.s)

    async def __call__(self, command: str, delay: float = 0.0) -> dict[str, Any]:
        await asyncio.sleep(delay)
        return await builtin_registry().invoke(
            "shell", {"command": command, "timeout_ms": 30_000}, self.ctx
        )


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_repository_planted_into_while_another_command_ends(
    shared_dir: Path, mode: str
) -> None:
    """Promise.all: A makes sub/.git; B ends (the new repository is checked and
    passes); A then plants a hook in it. A's end catches it."""
    settings = _skip(mode)
    ws, mark = make_repo(shared_dir, "self")
    session = Session(ws, settings)
    a = (
        "git init -q sub && git -C sub -c user.name=t -c user.email=t@t commit -q "
        "--allow-empty -m e && sleep 2 && "
        + HOOK.format(mark=mark, path="sub/.git/hooks/post-commit")
    )
    try:
        ra, rb = await asyncio.gather(session(a), session("sleep 0.5", delay=0.3))
    finally:
        session.s.close()
    assert rb["exit_code"] == 0
    assert "[sandbox] the command created the repository" in ra["output"], ra["output"]
    if (ws / "sub" / ".git").exists():
        git(ws / "sub", "commit", "-q", "--allow-empty", "-m", "host")
    assert not mark.exists(), ra["output"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_an_uninitialised_submodule_gets_no_hooks(shared_dir: Path, user: str, mode: str) -> None:
    settings = _skip(mode, user)
    lib = shared_dir / "lib-src"
    lib.mkdir()
    git(lib, "init", "-q")
    git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
    ws, mark = make_repo(shared_dir, "self")
    git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(ws, "commit", "-qm", "add lib")
    # registered, not initialised: as a fresh clone has it
    git(ws, "submodule", "deinit", "-q", "-f", "lib")
    import shutil

    shutil.rmtree(ws / ".git" / "modules" / "lib")
    give(shared_dir, user)
    attack = (
        "mkdir -p .git/modules/lib && cp -a "
        + str(lib / ".git")
        + "/. .git/modules/lib/ && "
        + HOOK.format(mark=mark, path=".git/modules/lib/hooks/post-checkout")
    )
    r = run_shell(user, ws, attack, **settings)
    git(ws, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
    assert not mark.exists(), r["output"]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("exists", [True, False], ids=["folder-there", "folder-absent"])
def test_a_hooks_path_in_the_work_tree_is_protected(
    shared_dir: Path, user: str, mode: str, exists: bool
) -> None:
    settings = _skip(mode, user)
    ws, mark = make_repo(shared_dir, "self")
    git(ws, "config", "core.hooksPath", ".githooks")  # the user's own setting (husky)
    if exists:
        (ws / ".githooks").mkdir()
        (ws / ".githooks" / "README").write_text("hooks\n")
    give(shared_dir, user)
    attack = "mkdir -p .githooks && " + HOOK.format(mark=mark, path=".githooks/pre-commit")
    r = run_shell(user, ws, attack, **settings)
    assert not (ws / ".githooks" / "pre-commit").exists(), r["output"]
    host_git_runs_nothing(ws, mark)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_an_included_config_in_the_work_tree_is_protected(
    shared_dir: Path, user: str, mode: str
) -> None:
    settings = _skip(mode, user)
    ws, mark = make_repo(shared_dir, "self")
    (ws / ".gitconfig").write_text("[user]\n\tname = team\n")
    git(ws, "config", "include.path", "../.gitconfig")  # relative to .git/config
    git(ws, "config", "filter.fmt.clean", "tools/fmt")
    (ws / "tools").mkdir()
    (ws / "tools" / "fmt").write_text("#!/bin/sh\ncat\n")
    (ws / "tools" / "fmt").chmod(0o755)
    give(shared_dir, user)
    attack = (
        f"printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .gitconfig; "
        f"printf '#!/bin/sh\\ntouch {mark}\\ncat\\n' > tools/fmt; "
        "echo '* filter=fmt' > .gitattributes; echo end"
    )
    r = run_shell(user, ws, attack, **settings)
    assert "end" in r["output"], r["output"]
    assert (ws / ".gitconfig").read_text() == "[user]\n\tname = team\n", r["output"]
    assert (ws / "tools" / "fmt").read_text() == "#!/bin/sh\ncat\n", r["output"]
    host_git_runs_nothing(ws, mark)
    git(ws, "add", "-A")
    assert not mark.exists()


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_the_users_own_config_rename_during_a_command_stays_protected(
    shared_dir: Path, mode: str
) -> None:
    """The user's `git config` writes a new file and renames it over .git/config while
    a command runs: a bind of the file would detach; the command appends to the new one."""
    settings = _skip(mode)
    ws, mark = make_repo(shared_dir, "self")
    session = Session(ws, settings)
    attack = (
        "sleep 1.5; printf '[core]\\n\\tfsmonitor = touch " + str(mark) + "\\n' >> .git/config; "
        "echo done"
    )
    try:
        task = asyncio.ensure_future(session(attack))
        await asyncio.sleep(0.6)
        assert not task.done()
        git(ws, "config", "user.name", "renamed by the user")  # lock file + rename
        r = await task
    finally:
        session.s.close()
    assert "fsmonitor" not in (ws / ".git" / "config").read_text(), r["output"]
    host_git_runs_nothing(ws, mark)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_hooks_symlink_into_the_work_tree_is_protected_at_its_target(
    shared_dir: Path, user: str, mode: str
) -> None:
    settings = _skip(mode, user)
    ws, mark = make_repo(shared_dir, "self")
    (ws / "tools" / "githooks").mkdir(parents=True)
    (ws / "tools" / "githooks" / "README").write_text("hooks\n")
    import shutil

    shutil.rmtree(ws / ".git" / "hooks")
    os.symlink("../tools/githooks", ws / ".git" / "hooks")
    give(shared_dir, user)
    attack = HOOK.format(mark=mark, path="tools/githooks/post-commit")
    r = run_shell(user, ws, attack, **settings)
    assert not (ws / "tools" / "githooks" / "post-commit").exists(), r["output"]
    host_git_runs_nothing(ws, mark)
