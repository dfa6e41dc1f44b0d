"""What the user's other programs run or trust, found by rule: kept off a writable root.

A workspace that is the home (or a folder above it) would otherwise let a command write
what the user's shell, PATH, ssh, git, editors and other agents read later, on the host,
with the user's full authority: ``~/.local/bin/git`` found first on PATH, ``.bashrc``,
``~/.ssh/authorized_keys``, ``~/.claude/settings.json``, ``~/.codex/hooks.json``. Rather
than a list of such files (never complete), two rules:

- when a root contains the home: every **dot-entry of the home** (``~/.NAME``, file or
  folder, present or made later), which is where shells, ssh, git, editors, agents,
  package managers and desktop sessions keep what they run or read as settings, except
  ``~/.cache``; and every folder of the host's **PATH** inside the home (``~/bin``,
  ``~/go/bin``), present or not, with ``~/bin``, which ``.profile`` puts on PATH once it
  exists;
- wherever a root contains them: the files and folders the **environment names** as
  settings other programs read (``$CODEX_HOME``, ``$CLAUDE_CONFIG_DIR``, ``$ZDOTDIR``,
  ``$XDG_CONFIG_HOME``, ``$XDG_DATA_HOME``, ``$BASH_ENV``, ``$ENV``,
  ``$GIT_CONFIG_GLOBAL``), a user-level folder that need not be in the home.

``own_paths`` treats them as codemode's own (read-only binds, the folders on the way
pinned, links and absent ones checked after each command, refused under Landlock, refused
to the file tools); a dot-entry a command adds to the home is moved aside after it
(``new_entries``), since no mount can hold the place of a name nobody chose yet.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from codemode.locations.user_dirs import env_path, home

# Dot-entries a command may write: caches (codemode's own inside stays read-only).
WRITABLE_DOT = (".cache",)
# Variables naming what other programs read as settings or run (see the docstring).
NAMED_BY_ENV = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "ZDOTDIR", "XDG_CONFIG_HOME",
                "XDG_DATA_HOME", "BASH_ENV", "ENV", "GIT_CONFIG_GLOBAL")  # fmt: skip
# Folders ``.profile`` puts on PATH once they exist (``~/.local/bin`` is a dot-entry).
PROFILE_BIN = ("bin",)
# What a refused entry is renamed to (``NAME.codemode-refused-N``, ``git_guard``).
REFUSED_MARK = ".codemode-refused-"

WHAT_DOT = "a dot-entry of your home (what your shell, ssh, git, editors and agents read)"
WHAT_PATH = "a folder of your PATH"
WHAT_LINKED = "what a symlink in a dot-folder of your home leads to"
WHAT_ENV = "a folder or file your environment names as settings ({var})"


def _inside(p: Path, root: Path) -> bool:
    return p == root or p.is_relative_to(root)


def holds_home(roots: Iterable[Path]) -> Path | None:
    """The home, when one of ``roots`` contains it (is it, or a folder above it)."""
    h = Path(os.path.abspath(home()))
    real = Path(os.path.realpath(h))
    return h if any(_inside(h, Path(r)) or _inside(real, Path(r)) for r in roots) else None


def trusted(roots: Sequence[Path]) -> list[tuple[Path, str]]:
    """(path, what it is) for everything the rules keep read-only in ``roots``."""
    env = tuple(os.environ.get(v) for v in ("HOME", "PATH", *NAMED_BY_ENV))
    h, path_dirs, named = _by_env(tuple(roots), env)
    if h is None:
        return list(named)
    names = dot_names(h)  # (read each time)
    out: dict[Path, str] = {h / name: WHAT_DOT for name in names}
    for name in names:
        for link in linked_from(h / name):
            out.setdefault(link, WHAT_LINKED)
    for p, what in (*path_dirs, *named):
        out.setdefault(p, what)
    return list(out.items())


def linked_from(entry: Path) -> tuple[Path, ...]:
    """The symlinks inside a dot-folder (``~/.config/nvim/init.lua -> ~/dotfiles/...``,
    GNU stow's way): the folder is read-only, what they lead to must be too, or a
    command writes it there. Looked for once per state of the folder (a link made
    inside it changes its own folder's time, deeper ones are found once the top one
    changes too), within ``_LINK_WALK`` entries."""
    try:
        st = os.lstat(entry)
    except OSError:
        return ()
    if not stat.S_ISDIR(st.st_mode):
        return ()
    return _links_in(entry, st.st_ino, st.st_mtime_ns)


# How many entries of one dot-folder are looked at for links, and how deep (a home's
# ~/.local or ~/.cargo can hold hundreds of thousands; links sit near the top).
_LINK_WALK = 4000
_LINK_DEPTH = 5


@functools.lru_cache(maxsize=256)
def _links_in(top: Path, _ino: int, _mtime: int) -> tuple[Path, ...]:
    found: list[Path] = []
    budget = _LINK_WALK
    stack = [(top, 0)]
    while stack and budget > 0:
        d, depth = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries[:budget]:
            if e.is_symlink():
                found.append(Path(e.path))
            elif depth < _LINK_DEPTH and e.is_dir(follow_symlinks=False):
                stack.append((Path(e.path), depth + 1))
        budget -= len(entries)
    return tuple(found)


@functools.lru_cache(maxsize=32)
def _by_env(
    roots: tuple[Path, ...], _env: tuple[str | None, ...]
) -> tuple[Path | None, tuple[tuple[Path, str], ...], tuple[tuple[Path, str], ...]]:
    # What the environment decides (asked before every command): the home when a root
    # holds it, the PATH folders in it, the folders the variables name inside a root.
    h = holds_home(roots)
    path_dirs = tuple((p, WHAT_PATH) for p in path_folders(h)) if h is not None else ()
    named: list[tuple[Path, str]] = []
    for var in NAMED_BY_ENV:
        p = env_path(var, relative_ok=False)
        if p is None or p == h:
            continue
        forms = (p, Path(os.path.realpath(p)))
        # strictly inside: a root that is the folder itself is the user working on it
        if any(f != r and _inside(f, r) for f in forms for r in roots):
            named.append((p, WHAT_ENV.format(var=f"${var}")))
    return h, path_dirs, tuple(named)


def write_refusal(path: Path, roots: Sequence[Path]) -> str | None:
    """What ``path`` is when the rules keep it read-only in ``roots`` (present or
    not: a dot-entry nobody made yet too), else None."""
    h = holds_home(roots)
    if h is not None:
        for top in dict.fromkeys([h, Path(os.path.realpath(h))]):
            if path != top and path.is_relative_to(top):
                if covered_name(path.relative_to(top).parts[0]):
                    return WHAT_DOT
    for p, what in trusted(roots):
        for form in dict.fromkeys([p, Path(os.path.realpath(p))]):
            if _inside(path, form):
                return what
    return None


def dot_names(h: Path) -> list[str]:
    """The home's dot-entries the rule covers (sorted)."""
    try:
        names = os.listdir(h)
    except OSError:
        return []
    return sorted(n for n in names if covered_name(n))


def covered_name(name: str) -> bool:
    """Whether a top-level entry of the home named ``name`` is kept read-only."""
    return (
        name.startswith(".")
        and name not in (".", "..", *WRITABLE_DOT)
        and REFUSED_MARK not in name
    )


def path_folders(h: Path) -> list[Path]:
    """The host's PATH folders inside the home that are no dot-entry's (those are
    covered whole), with ``~/bin``."""
    found = [h / n for n in PROFILE_BIN]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isabs(entry):
            continue  # relative entries name the working folder: not the home's
        p = Path(os.path.normpath(entry))
        if p != h and p.is_relative_to(h) and not p.relative_to(h).parts[0].startswith("."):
            found.append(p)
    return list(dict.fromkeys(found))


def new_entries(h: Path, before: frozenset[str]) -> list[Path]:
    """Dot-entries of the home that were not there ``before`` (a command made them)."""
    try:
        now = os.listdir(h)
    except OSError:
        return []
    return [h / n for n in sorted(now) if n not in before and covered_name(n)]
