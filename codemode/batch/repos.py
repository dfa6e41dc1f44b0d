"""Which repositories a batch run covers, from the ``--repos`` arguments.

Each argument is a FILE or a DIR:

- a FILE lists one repository path per line; blank lines and lines starting with
  ``#`` are skipped, and relative paths are taken from the file's own directory;
- a DIR that is itself a working copy is that one repository; any other DIR stands
  for its immediate subdirectories that are working copies, in name order.

A working copy is a directory holding ``.git`` (a directory, or the file that git
worktrees and submodules use), ``.hg``, ``.svn`` or ``.jj``. Paths are resolved
(symlinks followed) and each repository is run once, in the order first listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


class RepoListError(ValueError):
    """A ``--repos`` argument that names no usable repository; the message says why."""


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


def _from_dir(directory: Path) -> list[Path]:
    if is_working_copy(directory):
        return [directory]
    children = sorted(p for p in directory.iterdir() if is_working_copy(p))
    if not children:
        markers = ", ".join(VCS_MARKERS)
        raise RepoListError(
            f"{directory} is not a working copy and has no subdirectory that is one "
            f"(a directory holding {markers})"
        )
    return children


def find_repositories(specs: Iterable[str | Path]) -> list[Path]:
    """The repositories named by ``--repos`` arguments, resolved and without repeats."""
    seen: dict[Path, None] = {}
    for spec in specs:
        path = Path(spec).expanduser()
        if not path.exists():
            raise RepoListError(f"--repos {spec}: no such file or directory")
        found = _from_dir(path) if path.is_dir() else _from_file(path)
        for repo in found:
            seen.setdefault(repo.resolve(), None)
    if not seen:
        raise RepoListError("no repositories given")
    return list(seen)
