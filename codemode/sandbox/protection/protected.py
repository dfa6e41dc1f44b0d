"""Which paths inside a writable root stay read-only: the one predicate every writer uses.

Two kinds of path are protected, at every depth of a writable root:

- ``.codemode/`` and everything in it: the agent's own rules and settings, read by the
  next run started in that folder;
- ``.git`` and everything in it: its config, hooks and info (and those of
  ``modules/**`` and ``worktrees/*``) make git run code or read settings later, on the
  host, outside the sandbox, and a file git renames into it (``git config`` writes a new
  ``config`` and renames it) must stay read-only too, which only protecting the whole
  folder does. Creating or replacing a ``.git`` file or folder could point git at a
  directory the program filled. Commands read the repository; ``git add`` and
  ``git commit`` inside the sandbox fail (with bubblewrap; Landlock keeps copies of the
  parts git runs or reads and puts them back instead, ``git_guard``).

``GIT_PROTECTED`` names the parts of a git directory a copy is kept of under Landlock
and that ``git_named`` follows when they are symlinks.

The file tools call ``protected_reason`` with a path relative to the writable root they
are writing in (after walking it without following symlinks); the shell's bubblewrap
binds come from ``git_protected_paths`` and ``codemode_dirs``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePath

CODEMODE_DIR = ".codemode"
GIT_DIR = ".git"
# Inside a git directory (or a submodule's or worktree's): read by git as settings or
# run by git as code.
GIT_PROTECTED = ("config", "config.worktree", "commondir", "hooks", "info")
# Folders of a git directory that hold nested git directories.
GIT_NESTED = ("modules", "worktrees")


def protected_reason(relative: PurePath | str | Sequence[str]) -> str | None:
    """Why a path inside a writable root may not be written, or None if it may.

    ``relative`` is the path relative to the writable root (a ``PurePath``, a string
    with ``/`` separators, or its components); it must not contain ``..`` (resolve or
    walk it first). The reason is a short phrase such as ``".codemode/ is read-only"``.
    """
    parts = _parts(relative)
    for i, part in enumerate(parts):
        if part == CODEMODE_DIR:
            return f"{CODEMODE_DIR}/ is read-only (the agent's own rules and settings)"
        if part == GIT_DIR:
            rest = parts[i + 1 :]
            if not rest:
                return (
                    "a .git entry is read-only (replacing it could point git at files "
                    "the program chose)"
                )
            return _git_refusal(rest)
    return None


def is_protected(relative: PurePath | str | Sequence[str]) -> bool:
    return protected_reason(relative) is not None


def _parts(relative: PurePath | str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(relative, str):
        relative = PurePath(relative)
    if isinstance(relative, PurePath):
        return tuple(p for p in relative.parts if p not in ("/", "."))
    return tuple(p for p in relative if p not in ("", "."))


def _git_refusal(parts: Sequence[str]) -> str:
    return (
        f".git/ is read-only, .git/{'/'.join(parts)} too (git would run or read what is "
        "in it later, outside the sandbox)"
    )


_KERNEL_REFUSALS = ("Read-only file system", "Device or resource busy")
_PROTECTED_MARKERS = re.compile(
    r"((?<![\w.])\.(codemode|git)|(?<=/)codemode)(?=$|[/\s'\"`:\u2019])"
)


def refusal_hint(output: str) -> str | None:
    """The reason to add when command output shows the kernel refusing a write to a
    protected path (its message says only "Read-only file system" or "busy")."""
    for line in output.splitlines():
        if any(r in line for r in _KERNEL_REFUSALS) and _PROTECTED_MARKERS.search(line):
            return (
                "the whole .git is read-only inside the sandbox, as are .codemode/, the "
                "files git's config names (hooks path, includes, filters) and codemode's own "
                "files: git or codemode would run or read them later, outside it. Commands "
                "can read the repository (status, diff, log) but not change it: run git add "
                "and git commit yourself, outside codemode."
            )
    return None


# --- concrete paths, for the shell's bind mounts ----------------------------------------


def git_dirs(root: Path, within: Sequence[Path] = ()) -> Iterator[Path]:
    """The git directories inside ``root`` that host git will read: ``root/.git`` when it
    is a directory, the gitdir a ``.git`` file names when it lies inside ``root``, and
    every git directory under their ``modules/`` and ``worktrees/``. ``within``: where
    a gitdir may lie to count (default: ``root``)."""
    top = root / GIT_DIR
    seen: set[Path] = set()
    start: list[Path] = []
    if top.is_dir() and not top.is_symlink():
        start.append(top)
    elif top.is_file() and not top.is_symlink():
        target = gitfile_target(top)
        if target is not None and _inside_any(target, within or [root]):
            start.append(target)
    stack = start
    while stack:
        d = stack.pop()
        if d in seen:
            continue
        seen.add(d)
        yield d
        common = d / "commondir"
        text = _pointer_text(common) if not common.is_symlink() else None
        if text is not None:
            try:
                c = (d / text.strip()).resolve()
            except OSError:
                c = None
            if c is not None and _inside_any(c, within or [root]) and c.is_dir():
                stack.append(c)
        for nested in GIT_NESTED:
            stack.extend(_nested_git_dirs(d / nested))


def _nested_git_dirs(folder: Path, depth: int = 0) -> list[Path]:
    """Git directories below ``modules/`` or ``worktrees/`` (submodule names may contain
    slashes, so they can sit deeper than one level)."""
    if depth > 8 or not folder.is_dir() or folder.is_symlink():
        return []
    found: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        p = Path(e.path)
        if (p / "HEAD").exists() or (p / "gitdir").exists():
            found.append(p)
        else:
            found.extend(_nested_git_dirs(p, depth + 1))
    return found


def gitfile_target(gitfile: Path) -> Path | None:
    """The directory a ``.git`` file (``gitdir: PATH``) names, resolved; None if unreadable."""
    text = _pointer_text(gitfile)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            if not target.is_absolute():
                target = gitfile.parent / target
            return Path(os.path.normpath(target))
    return None


# git refuses a gitfile larger than this (``read_gitfile_gently``); a pointer is a line.
_MAX_POINTER_BYTES = 4 * 4096


def _pointer_text(path: Path) -> str | None:
    """The text of the small regular file ``path`` (a ``.git`` file, a ``commondir``);
    None if it is anything else or larger than a pointer is. A command made it: it may
    be a sparse file of terabytes (read whole, it would take as much memory) or a FIFO
    put there after the caller's look (opened without ``O_NONBLOCK``, it would wait
    for a writer for good). A symlink is not followed."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_POINTER_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_POINTER_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _inside_any(path: Path, roots: Sequence[Path]) -> bool:
    return any(_inside(path, r) for r in roots)
