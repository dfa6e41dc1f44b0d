"""May codemode's own git run in this repository? Only if its config names no program.

Git obeys many settings that run a command: ``remote.*.receivepack`` and ``uploadpack``,
``core.fsmonitor``, ``core.sshCommand``, ``core.hooksPath``, filters, credential helpers,
``gpg.program``, pagers and editors, ``include.path`` pulling in any of these, and
whatever git adds next. ``-c`` overrides can only name the keys known today, so the rule
here holds by construction instead: every setting that comes from the repository's own
files (``local`` and ``worktree`` scope, what they include) or from any file lying where a
confined command could have written it must be on a short allow-list of inert keys
(``git_sanity.SAFE_KEY``: formats, remotes' URLs and refspecs, branch tracking, the
identity). Anything else refuses the repository, naming the key. The user's own global
and system files are theirs and obeyed (their identity, their ssh setup).

The question is asked of git itself (``git config --list --show-scope --show-origin
--includes``), which only reads files and runs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from codemode.locations import launcher
from codemode.locations.host_programs import writable_root_of
from codemode.sandbox.git.git_sanity import SAFE_KEY


class RepoConfigRefused(Exception):
    """The repository's git config names something git would run (the message says which)."""


def clean_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for codemode's git in a repository: no ``GIT_*`` variable from
    outside (``GIT_DIR``, ``GIT_SSH_COMMAND``, ``GIT_CONFIG_*``, ``GIT_EXEC_PATH``...),
    never a prompt."""
    base = os.environ if env is None else env
    out = {k: v for k, v in base.items() if not k.startswith("GIT_")}
    out.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return out


def check(repo: Path) -> None:
    """Raise ``RepoConfigRefused`` when a setting git would read in ``repo`` comes from
    the repository or a file a command could have written and is not a known inert one."""
    try:
        proc = launcher.run(
            ["git", "config", "--list", "--show-scope", "--show-origin", "--includes", "-z"],
            cwd=repo, env=clean_env(), names_files=False, capture_output=True, timeout=60,
        )
    except (OSError, launcher.LaunchRefused) as exc:
        raise RepoConfigRefused(f"git config cannot be read: {exc}") from None
    if proc.returncode != 0:
        said = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RepoConfigRefused(f"git config cannot be read: {said[-1] if said else 'failed'}")
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    odd: list[str] = []
    for i in range(0, len(fields) - 2, 3):
        scope, origin, entry = fields[i], fields[i + 1], fields[i + 2]
        key = entry.split("\n", 1)[0]
        if SAFE_KEY.match(key):
            continue
        if scope in ("local", "worktree") or _written(origin, repo):
            odd.append(f"{key} ({_origin(origin)})")
    if odd:
        raise RepoConfigRefused(
            f"its git config sets {', '.join(sorted(set(odd))[:5])}, which is not one git "
            "reads as plain data and may name a program: codemode's git does not run in it "
            "(remove the setting, or publish by hand)")


def _written(origin: str, repo: Path) -> bool:
    if not origin.startswith("file:"):
        return False  # the command line, a blob, standard input
    path = origin[len("file:"):]
    full = path if os.path.isabs(path) else str(repo / path)
    return writable_root_of(full) is not None


def _origin(origin: str) -> str:
    return origin.removeprefix("file:")
