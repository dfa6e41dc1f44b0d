"""Which repositories a batch run covers, from the ``--repos`` arguments.

Each argument is a FILE or a DIR (every word after ``--repos`` up to an option or ``--``
is one, ``cli_options.spread_repos``); a path that does not exist, or a FILE that names
no repository, is an error that names it, before anything runs:

- a FILE lists one path per line, each taken as a DIR; blank lines and lines
  starting with ``#`` are skipped, and relative paths are taken from the file's own
  directory;
- a DIR that is itself a working copy is that one repository; any other DIR stands
  for its immediate subdirectories that are working copies, in name order; a DIR that
  is neither is *skipped*: reported by name, never silently dropped. A subdirectory
  that is a symbolic link is skipped and reported too, never followed: only a path the
  user names (an argument, a line of a FILE) is taken through a link.

A working copy is a directory holding ``.git`` (a directory, or the file that git
worktrees and submodules use), ``.hg``, ``.svn`` or ``.jj``. Paths are resolved
(symlinks followed) and each repository is run once, in the order first listed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


class RepoListError(ValueError):
    """A ``--repos`` argument that cannot be read (missing, an unreadable list)."""


@dataclass
class Skipped:
    """An argument (or list entry) that names no repository, and why."""

    path: Path
    reason: str


@dataclass
class RepoSelection:
    """The repositories ``--repos`` names, and the arguments that named none."""

    repositories: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def is_working_copy(path: Path) -> bool:
    """Whether ``path`` is the top of a working copy (it holds a VCS marker)."""
    return path.is_dir() and any((path / marker).exists() for marker in VCS_MARKERS)


def _from_file(list_file: Path) -> list[Path]:
    try:
        text = list_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RepoListError(f"cannot read the repository list {list_file}: {exc}") from None
    found: list[Path] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        path = Path(line).expanduser()
        if not path.is_absolute():
            path = list_file.parent / path
        where = f"{list_file}:{number}"
        if not path.exists():
            raise RepoListError(f"{where}: no such directory: {line}")
        if not path.is_dir():
            raise RepoListError(f"{where}: not a directory: {line}")
        found.append(path)
    if not found:
        raise RepoListError(f"the repository list {list_file} names no repository")
    return found


NOT_A_REPOSITORY = (
    "not a working copy and has no subdirectory that is one (a directory holding "
    + ", ".join(VCS_MARKERS)
    + ")"
)


def _from_dir(directory: Path) -> tuple[list[Path], list[Skipped]]:
    """The working copies ``directory`` stands for, and its subfolders that are
    symbolic links: those are reported, never followed. Whoever can put a link in a
    folder of repositories (a script given one of them writes links, and the apply
    makes them; an unpacked archive holds them) would otherwise point the batch, and
    its apply, commits and pushes, at any folder: one outside ``DIR`` (a repository
    under the user's home), ``/``, or the same repository twice."""
    if is_working_copy(directory):
        return [directory], []
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return [], []
    found: list[Path] = []
    links: list[Skipped] = []
    for child in children:
        if child.is_symlink():
            if not child.is_file():  # (a link to a file is a file: no repository)
                links.append(Skipped(directory.resolve() / child.name, _linked(child)))
        elif is_working_copy(child):
            found.append(child)
    return found, links


def _linked(link: Path) -> str:
    try:
        target = f" to {os.readlink(link)}"
    except OSError:
        target = ""
    return (f"a symbolic link{target}: links inside a --repos DIR are not followed (name "
            "the link itself, or its target, to run it)")  # fmt: skip


def select_repositories(specs: Iterable[str | Path]) -> RepoSelection:
    """The repositories named by ``--repos`` arguments, resolved and without repeats,
    and the directories that named none."""
    seen: dict[Path, None] = {}
    selection = RepoSelection()
    for spec in specs:
        path = Path(spec).expanduser()
        if not path.exists():
            raise RepoListError(
                f"--repos {spec}: no such file or directory (every word after --repos "
                "up to an option or `--` names a FILE or DIR: put the script's arguments, "
                "or exec's PROMPT, before --repos or after `--`)"
            )
        for directory in [path] if path.is_dir() else _from_file(path):
            found, links = _from_dir(directory)
            selection.skipped.extend(links)
            if not found and not links:
                selection.skipped.append(Skipped(directory.resolve(), NOT_A_REPOSITORY))
            for repo in found:
                seen.setdefault(repo.resolve(), None)
    selection.repositories = list(seen)
    return selection


def find_repositories(specs: Iterable[str | Path]) -> list[Path]:
    """The repositories named by ``--repos`` arguments (see ``select_repositories``)."""
    return select_repositories(specs).repositories
