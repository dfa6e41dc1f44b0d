"""Files outside ``.git`` that git's effective configuration makes it read or run.

``.git`` itself is read-only to commands (``bwrap.git_binds``), but a repository's
configuration may point git at files of the work tree: ``core.hooksPath = .githooks``
(the husky pattern), ``include.path = ../.gitconfig``, a filter or textconv program
``tools/clean``, a ``.git/hooks`` that is a symlink to ``tools/githooks``. A command
that rewrites one of those makes the user's next ``git commit`` (or the shell prompt's
``git status``) run what it chose. So the configuration git will actually read is asked
of git itself (``git config --list --show-origin --includes``, with the user's global
and system files, as the user's git reads them), and every file it came from and every
path a setting names (``git_named_keys.toml``) that lies in a writable root is protected
like ``.git``: bound read-only, or checked after the command when it does not exist.

The answer is kept while the files it was read from are unchanged (one ``stat`` each),
so git runs once per session, not once per command.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import shlex
import subprocess
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from codemode.locations import launcher
from codemode.locations.host_programs import host_program
from codemode.sandbox.git.host_git import git_env
from codemode.sandbox.protection.protected import GIT_DIR, GIT_PROTECTED, git_dirs

Identity = tuple[int, int, int, int] | None


@functools.cache
def _keys() -> tuple[tuple[str, ...], tuple[str, ...]]:
    text = resources.files("codemode.sandbox.git").joinpath("git_named_keys.toml").read_text()
    data = tomllib.loads(text)
    return tuple(data["paths"]["keys"]), tuple(data["programs"]["keys"])


def _identity(p: Path) -> Identity:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# root -> (identities of what the answer was read from, the answer)
_cache: dict[Path, tuple[tuple[tuple[Path, Identity], ...], tuple[Path, ...]]] = {}


def named_paths(root: Path, writable: Sequence[Path]) -> list[Path]:
    """Paths in ``writable`` that git, run in ``root``, reads as configuration or runs:
    config files outside ``.git`` and the files and folders settings name there."""
    if not os.path.lexists(root / GIT_DIR):
        return []
    cached = _cache.get(root)
    if cached is not None and all(_identity(p) == ident for p, ident in cached[0]):
        found = cached[1]
    else:
        read_from, found_list = _ask_git(root)
        found_list += _symlinked_entries(root)
        found = tuple(dict.fromkeys(found_list))
        watched = [root / GIT_DIR, root / GIT_DIR / "config", *read_from]
        _cache[root] = (tuple((p, _identity(p)) for p in watched), found)
    return [p for p in found if any(_inside(p, w) for w in writable) and not _in_git(p, root)]


def _ask_git(root: Path) -> tuple[list[Path], list[Path]]:
    """(config files git read, paths named by settings) for a repository at ``root``."""
    env = {k: v for k, v in git_env().items() if not k.startswith("GIT_CONFIG")}
    env.pop("GIT_OPTIONAL_LOCKS", None)
    base = host_program("git") or "/usr/bin/git"
    try:
        proc = launcher.run(
            [base, "-c", "safe.directory=" + str(root), "config", "--list", "--show-origin",
             "--includes", "-z"],
            cwd=root, env=env, capture_output=True, timeout=10, names_files=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return [], []
    top = root
    items = proc.stdout.decode(errors="replace").split("\0")
    files: list[Path] = []
    named: list[Path] = []
    path_keys, program_keys = _keys()
    i = 0
    while i + 1 < len(items):
        origin, entry = items[i], items[i + 1]
        i += 2
        key, _, value = entry.partition("\n")
        key = key.lower()
        if not origin.startswith("file:"):
            continue
        source = Path(os.path.normpath(root / os.path.expanduser(origin[len("file:") :])))
        files.append(source)
        if any(fnmatch.fnmatchcase(key, k) for k in path_keys) and value:
            base_dir = source.parent if key.endswith(".path") else top
            named.append(_resolve(value, base_dir))
        elif any(fnmatch.fnmatchcase(key, k) for k in program_keys) and value:
            named += [_resolve(w, top) for w in _words(value) if "/" in w]
    files = list(dict.fromkeys(files))
    return files, [*files, *named]


def _symlinked_entries(root: Path) -> list[Path]:
    """Where a protected entry of a git directory that is a symlink leads (a
    ``.git/hooks`` linked to ``tools/githooks``)."""
    out = []
    for gitdir in git_dirs(root):
        for name in GIT_PROTECTED:
            p = gitdir / name
            if p.is_symlink():
                out.append(Path(os.path.realpath(p)))
    return out


def _words(value: str) -> list[str]:
    try:
        return shlex.split(value.lstrip("!"))
    except ValueError:
        return value.lstrip("!").split()


def _resolve(value: str, base: Path) -> Path:
    if value.startswith("gitdir:") or value.startswith(":"):
        value = value.split(":", 1)[1]
    p = Path(os.path.expanduser(value))
    return Path(os.path.normpath(p if p.is_absolute() else base / p))


def _inside(p: Path, root: Path) -> bool:
    return p == root or p.is_relative_to(root)


def _in_git(p: Path, root: Path) -> bool:
    # already read-only with .git itself
    return _inside(p, root / GIT_DIR)
