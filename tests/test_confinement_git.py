"""After any program in workspace-write, git on the host runs nothing the program chose.

A real repository in the workspace; each attack is one confined shell command (both
backends, as this user and as nobody); afterwards plain git runs on the host, the way
the user would run it, and codemode's own hardened git too. The payload of every
attack creates a marker file outside the workspace that only the host could create.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from confinement_support import give, run_shell, shared_dir, skip_unless

from codemode.sandbox.git.host_git import git_argv, git_env

__all__ = ["shared_dir"]

HOOK = "printf '#!/bin/sh\\ntouch {mark}\\n' > {path} && chmod +x {path}"
ATTACKS = {
    "fsmonitor": 'git config core.fsmonitor "touch {mark}"',
    "hooks_path": "mkdir -p hk && " + HOOK.format(mark="{mark}", path="hk/pre-commit")
    + " && git config core.hooksPath hk",
    "config_append": "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .git/config",
    "hook": HOOK.format(mark="{mark}", path=".git/hooks/pre-commit"),
    "rename_git": "mv .git .g && mkdir .git && cp -a .g/. .git/ && rm -rf .git/hooks && "
    "mkdir .git/hooks && " + HOOK.format(mark="{mark}", path=".git/hooks/pre-commit"),
    "symlink_hooks": "mkdir -p hk && " + HOOK.format(mark="{mark}", path="hk/pre-commit")
    + " && rm -rf .git/hooks && ln -s ../hk .git/hooks",
    "commondir": "mkdir -p evil && cp -a .git/. evil/ && "
    "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> evil/config && "
    "echo ../evil > .git/commondir",
    "info": "echo '* filter=x' > .git/info/attributes",
    "module_config": "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .git/modules/sub/config",
    "module_rename": "mv .git/modules .git/m && mkdir -p .git/modules/sub/hooks && "
    + HOOK.format(mark="{mark}", path=".git/modules/sub/hooks/pre-commit"),
    "new_repo_in_git_dir": "rm -rf .git/modules/sub && mkdir -p .git/modules/sub/hooks && "
    + HOOK.format(mark="{mark}", path=".git/modules/sub/hooks/post-checkout"),
}


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    # safe.directory: the repository may belong to nobody; git must still read its config
    argv = ["git", "-c", "safe.directory=*", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)


def make_repo(shared_dir: Path, user: str) -> tuple[Path, Path]:
    ws, outside = shared_dir / "ws", shared_dir / "outside"
    ws.mkdir()
    outside.mkdir()
    outside.chmod(0o777)
    git(ws, "init", "-q")
    (ws / "a.txt").write_text("one\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-qm", "first")
    # a submodule's git directory, as `git submodule add` leaves it
    mod = ws / ".git" / "modules" / "sub"
    (mod / "hooks").mkdir(parents=True)
    (mod / "info").mkdir()
    (mod / "HEAD").write_text("ref: refs/heads/main\n")
    (mod / "config").write_text("[core]\n\tbare = false\n")
    give(ws, user)
    return ws, outside / "MARK"


def protected_state(ws: Path) -> dict[str, object]:
    g = ws / ".git"
    out: dict[str, object] = {"git_is_dir": g.is_dir() and not g.is_symlink()}
    for rel in ["config", "modules/sub/config"]:
        p = g / rel
        out[rel] = p.read_bytes() if p.is_file() else None
    for rel in ["hooks", "info", "modules/sub/hooks"]:
        p = g / rel
        out[rel] = sorted(os.listdir(p)) if p.is_dir() and not p.is_symlink() else "not a dir"
    out["commondir"] = (g / "commondir").exists()
    return out


def host_git_runs_nothing(ws: Path, mark: Path) -> None:
    (ws / "a.txt").write_text("two\n")
    for args in (["status"], ["diff"], ["log", "-1"], ["commit", "-qam", "host commit"]):
        git(ws, *args)
    subprocess.run(git_argv("diff", "HEAD~1"), cwd=ws, env=git_env(), capture_output=True)
    assert not mark.exists(), "host git ran a command the program chose"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_git_attack_changes_nothing_git_reads(
    shared_dir: Path, user: str, backend: str, attack: str
) -> None:
    skip_unless(user, backend)
    ws, mark = make_repo(shared_dir, user)
    before = protected_state(ws)
    r = run_shell(user, ws, ATTACKS[attack].format(mark=mark), backend=backend)
    if backend == "bubblewrap":
        # refused as it happened, or (a file git must not find: commondir) removed after
        assert r["exit_code"] != 0 or "[sandbox] the command created" in r["output"]
    assert protected_state(ws) == before, r["output"]
    host_git_runs_nothing(ws, mark)


async def test_landlock_says_what_it_put_back(shared_dir: Path) -> None:
    skip_unless("self", "landlock")
    ws, mark = make_repo(shared_dir, "self")
    r = run_shell("self", ws, ATTACKS["fsmonitor"].format(mark=mark), backend="landlock")
    assert f"[sandbox] the command changed {ws}/.git/config; put back as it was" in r["output"]


async def test_git_reads_the_repository_and_changes_it_only_under_landlock(
    shared_dir: Path, user: str, backend: str
) -> None:
    """With bubblewrap all of .git is read-only: commands read the repository (status,
    diff, log) and `git add`/`git commit` fail saying why. Landlock cannot make it
    read-only; there they work, and what git runs or reads is put back after."""
    skip_unless(user, backend)
    ws, mark = make_repo(shared_dir, user)
    read = "echo new > b.txt && git log --oneline | wc -l && git status --short && git diff"
    r = run_shell(user, ws, read, backend=backend)
    assert r["exit_code"] == 0, r["output"]
    assert r["output"].split()[:3] == ["1", "??", "b.txt"], r["output"]
    cmd = ("git add b.txt && git -c user.name=t -c user.email=t@t "
           "commit -qm 'from the sandbox' && git log --oneline | wc -l")
    r = run_shell(user, ws, cmd, backend=backend)
    if backend == "bubblewrap":
        assert r["exit_code"] != 0, r["output"]
        assert "index.lock': Read-only file system" in r["output"], r["output"]
        assert "the whole .git is read-only" in r["output"], r["output"]
        assert git(ws, "log", "-1", "--format=%s").stdout.strip() == "first"
    else:
        assert r["exit_code"] == 0 and r["output"].split()[0] == "2", r["output"]
        assert git(ws, "log", "-1", "--format=%s").stdout.strip() == "from the sandbox"
    host_git_runs_nothing(ws, mark)


async def test_worktree_git_file_cannot_be_rewritten(
    shared_dir: Path, user: str, backend: str
) -> None:
    skip_unless(user, backend)
    main = shared_dir / "main"
    main.mkdir()
    git(main, "init", "-q")
    (main / "a.txt").write_text("one\n")
    git(main, "add", "a.txt")
    git(main, "commit", "-qm", "first")
    ws = shared_dir / "ws"
    git(main, "worktree", "add", "-q", str(ws))
    give(shared_dir, user)
    mark = shared_dir / "MARK"
    gitfile = (ws / ".git").read_text()
    attack = ("mkdir -p .evilgit && cp -a " + str(main / ".git") + "/. .evilgit/ && "
              f"printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .evilgit/config; "
              "echo 'gitdir: .evilgit' > .git; rm -f .git; echo 'gitdir: .evilgit' > .git")
    r = run_shell(user, ws, attack, backend=backend)
    assert (ws / ".git").read_text() == gitfile, r["output"]
    git(ws, "status")
    git(ws, "diff")
    assert not mark.exists()


async def test_codemode_dir_cannot_be_planted_at_the_root(
    shared_dir: Path, user: str, backend: str
) -> None:
    skip_unless(user, backend)
    ws, _ = make_repo(shared_dir, user)
    r = run_shell(user, ws, "mkdir -p .codemode/rules && echo x > .codemode/rules/x.rules",
                  backend=backend)
    assert not (ws / ".codemode" / "rules").exists(), r["output"]


@pytest.mark.parametrize(
    "attack",
    [
        'git config --global core.fsmonitor "touch {mark}"',
        "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' > ~/.gitconfig",
        "mkdir -p ~/.config/git && printf '[core]\\n\\tfsmonitor = touch {mark}\\n' "
        "> ~/.config/git/config",
    ],
)
async def test_a_home_folder_workspace_keeps_the_global_git_config(
    shared_dir: Path, user: str, backend: str, attack: str
) -> None:
    skip_unless(user, backend)
    ws, mark = make_repo(shared_dir, user)
    home = {"HOME": str(ws), "XDG_CONFIG_HOME": str(ws / ".config")}
    r = run_shell(user, ws, attack.format(mark=mark), backend=backend, extra_env=home)
    assert (not (ws / ".gitconfig").exists() and not (ws / ".config" / "git").exists()) or (
        "config" not in os.listdir(ws / ".config" / "git")), r["output"]
    env = {**os.environ, **home}
    for args in (["status"], ["diff"]):
        subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=ws, env=env,
                       capture_output=True)
    assert not mark.exists(), r["output"]


@pytest.mark.parametrize(
    "attack",
    [
        "mkdir -p sub/.codemode/rules && echo x > sub/.codemode/rules/x.rules",
        "mkdir -p a/b/c && mkdir -p a/b/c/.codemode/rules",
        "mkdir -p t/x/.codemode && mv t deep",
        "echo x > existing/.codemode/rules/x.rules",
    ],
)
async def test_codemode_dir_cannot_be_planted_at_any_depth(
    shared_dir: Path, user: str, backend: str, attack: str
) -> None:
    skip_unless(user, backend)
    ws, _ = make_repo(shared_dir, user)
    (ws / "existing" / ".codemode" / "rules").mkdir(parents=True)
    give(ws, user)
    r = run_shell(user, ws, attack, backend=backend)
    # whatever the command made is no longer where a later run would read it
    found = [p for p in ws.rglob("*.rules") if ".codemode" in p.relative_to(ws).parts]
    assert found == [], r["output"]
    existing = ws / "existing" / ".codemode"
    planted = [p for p in ws.rglob(".codemode") if p.parent != ws and p != existing]
    assert planted == [], r["output"]
    assert "[sandbox] the command " in r["output"] or r["exit_code"] != 0


async def test_a_refused_git_write_says_why(shared_dir: Path) -> None:
    skip_unless("self", "bubblewrap")
    ws, _ = make_repo(shared_dir, "self")
    r = run_shell("self", ws, "git config core.fsmonitor true", backend="bubblewrap")
    assert r["exit_code"] != 0
    assert "[sandbox] the whole .git is read-only inside the sandbox" in r["output"], r["output"]


async def test_landlock_guard_keeps_the_first_baseline_across_parallel_commands(
    shared_dir: Path,
) -> None:
    import asyncio

    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools import ToolContext, builtin_registry

    skip_unless("self", "landlock")
    ws, mark = make_repo(shared_dir, "self")
    config = (ws / ".git" / "config").read_bytes()
    s = SandboxSession(ws, SandboxSettings(backend="landlock", approval_policy="never"))
    ctx = ToolContext(workspace=ws, sandbox=s)

    async def run(cmd: str, delay: float) -> None:
        await asyncio.sleep(delay)
        await builtin_registry().invoke("shell", {"command": cmd}, ctx)

    try:
        planted = f"printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .git/config; sleep 1"
        # the second starts while the first has planted its setting, and ends after it
        await asyncio.gather(run(planted, 0), run("sleep 1.5", 0.4))
    finally:
        s.close()
    assert (ws / ".git" / "config").read_bytes() == config


NEW_REPO = (
    "mkdir evil && cd evil && git init -q && "
    "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m e && {plant} && cd .."
)
# registered in the top repository's index (Landlock; .git is read-only with bubblewrap)
NESTED = NEW_REPO + (
    " && git update-index --add --cacheinfo 160000,$(git -C evil rev-parse HEAD),evil"
)


@pytest.mark.parametrize(
    "plant",
    [
        'git config core.fsmonitor "touch {mark}; false"',
        HOOK.format(mark="{mark}", path=".git/hooks/post-checkout"),
        "printf '[include]\\n\\tpath = ../x\\n' >> .git/config",
    ],
)
async def test_a_new_repository_registered_as_a_submodule_runs_nothing(
    shared_dir: Path, user: str, backend: str, plant: str
) -> None:
    # a plain `git status` at the top runs git inside every checked-out submodule
    skip_unless(user, backend)
    ws, mark = make_repo(shared_dir, user)
    r = run_shell(user, ws, NESTED.format(plant=plant.format(mark=mark)), backend=backend)
    assert "[sandbox] the command created the repository" in r["output"], r["output"]
    host_git_runs_nothing(ws, mark)


async def test_a_clean_new_repository_is_kept_and_then_protected(
    shared_dir: Path, user: str, backend: str
) -> None:
    skip_unless(user, backend)
    ws, mark = make_repo(shared_dir, user)
    r = run_shell(user, ws, NEW_REPO.format(plant="true"), backend=backend)
    assert r["exit_code"] == 0 and "[sandbox]" not in r["output"], r["output"]
    assert (ws / "evil" / ".git" / "HEAD").is_file()
    # later commands of the same session would find it protected; a fresh session too
    r = run_shell(user, ws, 'git -C evil config core.fsmonitor "touch ' + str(mark) + '"',
                  backend=backend)
    host_git_runs_nothing(ws, mark)
    assert "fsmonitor" not in (ws / "evil" / ".git" / "config").read_text(), r["output"]


async def test_landlock_repair_never_writes_through_a_swapped_folder(
    shared_dir: Path,
) -> None:
    # .git/modules swapped for a link to a folder outside: putting back
    # modules/sub/config must not write there
    skip_unless("self", "landlock")
    ws, _ = make_repo(shared_dir, "self")
    target = shared_dir / "outside" / "elsewhere"
    target.mkdir()
    attack = f"mv .git/modules .git/m && ln -s {target} .git/modules"
    r = run_shell("self", ws, attack, backend="landlock")
    assert list(target.iterdir()) == [], r["output"]
    assert not (ws / ".git" / "modules").is_symlink(), r["output"]
