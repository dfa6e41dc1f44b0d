"""Is a git repository a command just created safe for git on the host?

A command may create a repository anywhere in the workspace (``git init sub``,
``git clone``, ``git submodule add``) and register it in the top repository's index, and
a plain ``git status`` at the top then runs git inside it, with its settings. So each
new ``.git`` entry is checked once the command ends: its settings may only be the plain
ones ``git init``, ``git clone`` and ``git submodule`` write, its hooks only the
samples, and it may not redirect git elsewhere (``commondir``, a symlink). One that
fails is moved aside (``.git.codemode-refused-N``), so git no longer sees a repository
there; one that passes is protected from then on like any other.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from codemode.hostfs.writer import Refused, writer_at
from codemode.locations import launcher
from codemode.sandbox.git.host_git import git_argv, git_env
from codemode.sandbox.protection.protected import gitfile_target
from codemode.tool_terms.errors import ToolError

SAFE_KEY = re.compile(
    r"^(core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase"
    r"|precomposeunicode|symlinks|worktree|autocrlf|eol|safecrlf)"
    r"|remote\..+\.(url|pushurl|fetch|tagopt|prune)"
    r"|branch\..+\.(remote|merge|rebase)"
    r"|submodule\..+\.(url|active)"
    r"|user\.(name|email)|init\.defaultbranch|extensions\.objectformat"
    r"|index\.version|gc\.auto|pull\.rebase)$",
    re.IGNORECASE,
)


def unsafe_reason(entry: Path, writable: Sequence[Path]) -> str | None:
    """Why the ``.git`` entry ``entry`` could make host git run something, or None."""
    if entry.is_symlink():
        return "it is a symlink"
    gitdir = entry
    if entry.is_file():
        target = gitfile_target(entry)
        if target is None:
            return "its gitdir line cannot be read"
        if not any(_inside(target, w) for w in writable):
            return None  # a git directory the command could not have written
        gitdir = target
    if not gitdir.is_dir():
        return None
    if os.path.lexists(gitdir / "commondir"):
        return "it has a commondir file (it would read another directory's settings)"
    hooks = gitdir / "hooks"
    if hooks.is_symlink():
        return "its hooks folder is a symlink"
    if hooks.is_dir():
        planted = sorted(n for n in os.listdir(hooks) if not n.endswith(".sample"))
        if planted:
            return f"it has hooks ({', '.join(planted[:5])})"
    for name in ("config", "config.worktree"):
        why = _config_reason(gitdir / name)
        if why is not None:
            return why
    return None


def looks(entry: Path) -> tuple[object, ...]:
    """A cheap fingerprint of what ``unsafe_reason`` looks at (stats, no reading): when
    it is unchanged, so is the answer."""
    gitdir = gitfile_target(entry) if entry.is_file() else entry
    parts: list[object] = [_stat(entry)]
    if gitdir is not None:
        for name in ("config", "config.worktree", "commondir", "hooks"):
            parts.append(_stat(gitdir / name))
    return tuple(parts)


def _stat(p: Path) -> tuple[int, ...] | None:
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _config_reason(path: Path) -> str | None:
    if not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_file():
        return f"its {path.name} is not a plain file"
    argv = git_argv("config", "--file", str(path), "--list", "--name-only")
    try:
        proc = launcher.run(argv, env=git_env(), capture_output=True, text=True, timeout=10,
                            names_files=False)  # (the file is read as data, never run)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"its {path.name} cannot be read ({exc})"
    if proc.returncode != 0:
        return f"its {path.name} cannot be read"
    odd = [k for k in proc.stdout.split() if not SAFE_KEY.match(k)]
    if odd:
        return f"its {path.name} sets {', '.join(sorted(set(odd))[:5])}"
    return None


def _inside(p: Path, root: Path) -> bool:
    return p == root or p.is_relative_to(root)


def set_aside(entry: Path, why: str, roots: Sequence[Path]) -> str:
    """Move the ``.git`` entry ``entry`` aside (``.git.codemode-refused-N``), from the
    writable root of ``roots`` it lies under, no link followed (``writer``): a folder on
    the way that is a link now was moved by a command, and what it leads to is not this
    repository."""
    try:
        writer, rel = writer_at(entry, roots)
        dest = writer.set_aside(rel, ".codemode-refused-")
    except (Refused, FileNotFoundError, NotADirectoryError):
        return f"the command created the repository {entry.parent}, and {why}; it moved away"
    except (OSError, ToolError) as exc:
        return (
            f"the command created the repository {entry.parent}, and {why}; its .git "
            f"could not be moved aside: {exc}"
        )
    return (
        f"the command created the repository {entry.parent}, and {why}: git on the host "
        f"would run that later, so its .git was moved to {dest}"
    )
