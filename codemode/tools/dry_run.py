"""Dry runs: file-writing tools record what they would change instead of changing it.

A ``DryRun`` set on ``ToolContext.dry_run`` records changes in memory; the file tools
reach it as a file store layered over the disk (``DryRunStore`` in
``codemode.tools.store.overlay``, what ``codemode.tools.context.store_for`` gives them then).
Writes go into it after the usual writability check, so confinement is enforced exactly
as in a real run; reads look in it first, so a program that writes a file (with
write_file, edit or apply_patch) and reads it back sees its own change. At the
end ``diff()`` gives every change as one unified diff (git's ``a/`` ``b/`` form).

Only tools that honour the overlay may run during a dry run; ``codemode.tools.dry_run_gate``
refuses the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What diff and git print after a last line that has no line ending.
NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class FileChange:
    """One file's change in a dry run; ``None`` content means the file does not exist."""

    path: Path
    before: bytes | None
    after: bytes | None


def _key(path: Path) -> Path:
    # Symlinks and ``..`` resolved, so a file reached two ways is one entry.
    return path.resolve()


class DryRun:
    """The changes a dry run has recorded, by resolved path: what each file held before
    (as the store below had it) and what it holds now (``None``: removed).

    The file tools write into it through its overlay store (``DryRunStore``, which
    ``codemode.tools.context.store_for`` makes); ``diff()`` and ``changed_paths()``
    report what it recorded."""

    def __init__(self) -> None:
        self._after: dict[Path, bytes | None] = {}
        self._before: dict[Path, bytes | None] = {}

    def __contains__(self, path: Path) -> bool:
        """Whether ``path`` has a recorded change (then ``content`` is authoritative)."""
        return _key(path) in self._after

    def content(self, path: Path) -> bytes | None:
        """The recorded contents of ``path``; ``None`` if it was removed. Only for
        paths ``in`` the overlay."""
        return self._after[_key(path)]

    def record(self, path: Path, data: bytes | None, before: Callable[[], bytes | None]) -> None:
        """Record ``data`` (None: removed) as the new contents of ``path``; ``before``
        gives what it held before the dry run, asked only the first time."""
        key = _key(path)
        if key not in self._before:
            self._before[key] = before()
        self._after[key] = data

    def recorded(self) -> list[Path]:
        """Every path with a recorded change, symlinks resolved."""
        return list(self._after)

    def state(self) -> tuple[dict[Path, bytes | None], dict[Path, bytes | None]]:
        """A copy of what is recorded, for ``restore`` (all-or-nothing recording)."""
        return dict(self._after), dict(self._before)

    def restore(self, state: tuple[dict[Path, bytes | None], dict[Path, bytes | None]]) -> None:
        self._after, self._before = dict(state[0]), dict(state[1])

    def changes(self) -> list[FileChange]:
        """Files whose contents differ from the disk, sorted by path."""
        found = []
        for key in sorted(self._after):
            before, after = self._before[key], self._after[key]
            if before != after:
                found.append(FileChange(key, before, after))
        return found

    def diff(self, root: Path) -> str:
        """Every change as a unified diff, paths relative to ``root`` where inside it."""
        import difflib

        root = root.resolve()
        parts: list[str] = []
        for change in self.changes():
            name = _relative(change.path, root)
            old = _lines(change.before)
            new = _lines(change.after)
            parts.append(f"diff --git a/{name} b/{name}\n")
            if change.before is None:
                parts.append("new file\n")
            elif change.after is None:
                parts.append("deleted file\n")
            before_name = "/dev/null" if change.before is None else f"a/{name}"
            after_name = "/dev/null" if change.after is None else f"b/{name}"
            for line in difflib.unified_diff(old, new, before_name, after_name):
                if not line.endswith("\n"):
                    line += "\n" + NO_NEWLINE
                parts.append(line)
        return "".join(parts)

    def changed_paths(self, root: Path) -> list[str]:
        """The changed files, relative to ``root`` where inside it."""
        root = root.resolve()
        return [_relative(change.path, root) for change in self.changes()]


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    from codemode.tools.fs.text import decode, split_lines

    # As read_file shows the file: UTF-8, else Latin-1 (no byte turns into U+FFFD).
    return split_lines(decode(data)[0])
