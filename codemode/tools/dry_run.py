"""Dry runs: file-writing tools record what they would change instead of changing it.

A ``DryRun`` set on ``ToolContext.dry_run`` is an in-memory overlay over the workspace.
Writing tools put new contents (or a removal) into it after the usual writability
check, so confinement is enforced exactly as in a real run; ``read_file`` looks in it
first, so a program that writes a file and reads it back sees its own change. At the
end ``diff()`` gives every change as one unified diff (git's ``a/`` ``b/`` form).

Only tools that honour the overlay may run during a dry run: readers (``effect="read"``
on their definition) and writers marked ``dry_run=True``. ``dry_run_gate`` (an
interceptor, which ``dry_run_registry`` puts in a registry's pipeline) refuses every
other tool, since a tool that writes behind the overlay's back (the shell, or one
a plugin adds) would change files that the diff never shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from codemode.tools.context import ToolError
from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.tools.base import Tool
    from codemode.tools.pipeline import Call, Interceptor, Next


def allowed_in_dry_run(tool: Tool) -> bool:
    """Readers, and the writers that record into the overlay (``Tool.dry_run``: set once
    a writer writes through ``DryRun.write``/``DryRun.remove``)."""
    return tool.effect == "read" or tool.dry_run


# What diff and git print after a last line that has no line ending.
NO_NEWLINE = "\\ No newline at end of file\n"


class Removed(Protocol):
    path: Path


class Written(Protocol):
    path: Path
    data: bytes


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
    """The changes a dry run has recorded, by resolved path."""

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

    def exists(self, path: Path) -> bool:
        """Whether ``path`` is a file or directory as the dry run sees it."""
        key = _key(path)
        if key in self._after:
            return self._after[key] is not None
        return key.exists() or any(
            k.is_relative_to(key) and v is not None for k, v in self._after.items()
        )

    def write(self, path: Path, data: bytes) -> bool:
        """Record ``data`` as the new contents of ``path``; True if that creates it.

        ``path`` must already have passed ``ToolContext.resolve_writable``.
        """
        key = _key(path)
        for parent in key.parents:
            if self._after.get(parent) is not None or (
                parent not in self._after and parent.is_file()
            ):
                raise ToolError(f"cannot create {path}: {parent} is a file")
        if key not in self._after and key.is_dir():
            raise ToolError(f"{path} is a directory")
        created = not self.exists(key)
        self._remember(key)
        self._after[key] = data
        return created

    def remove(self, path: Path) -> None:
        """Record that ``path`` (a file) is deleted."""
        key = _key(path)
        self._remember(key)
        self._after[key] = None

    def record(self, removals: Iterable[Removed], writes: Iterable[Written]) -> None:
        """Record a set of removals and writes (apply_patch's plan) together: either all
        are recorded or, when one cannot be (ToolError), none is."""
        before = (dict(self._after), dict(self._before))
        try:
            for removal in removals:
                self.remove(removal.path)
            for write in writes:
                self.write(write.path, write.data)
        except ToolError:
            self._after, self._before = before
            raise

    def _remember(self, key: Path) -> None:
        if key not in self._before:
            self._before[key] = _disk_bytes(key)

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


def _disk_bytes(path: Path) -> bytes | None:
    """The regular file at ``path`` as it is on disk (None: none there); never a device
    or FIFO, never more than read_file's cap."""
    from codemode.tools.files import MAX_READ_BYTES
    from codemode.tools.fs.reading import read_regular

    try:
        return read_regular(path, MAX_READ_BYTES)
    except (OSError, ToolError):
        return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    from codemode.tools.files import split_lines
    from codemode.tools.fs.text import decode

    # As read_file shows the file: UTF-8, else Latin-1 (no byte turns into U+FFFD).
    return split_lines(decode(data)[0])


def dry_run_gate(registry: ToolRegistry) -> Interceptor:
    """A ``gate``-stage interceptor refusing, during a dry run (``ctx.dry_run`` set),
    every tool of ``registry`` not ``allowed_in_dry_run``."""

    async def gate(call: Call, next_: Next) -> Any:
        tool = call.tool
        if call.ctx.dry_run is None or tool is None or allowed_in_dry_run(tool):
            return await next_(call)
        why = (
            "commands could change files without the change being recorded"
            if tool.effect == "run"
            else "it does not record its changes in the dry run"
        )
        available = sorted(t.name for t in registry if allowed_in_dry_run(t))
        raise ToolError(
            f"tools.{call.name} is refused in a dry run ({why}); "
            f"tools available: {', '.join(available)}"
        )

    return gate


def dry_run_registry(registry: ToolRegistry) -> ToolRegistry:
    """A copy of ``registry`` that refuses, in a dry run, the tools that would write
    behind the overlay's back."""
    guarded = registry.copy()
    guarded.use(dry_run_gate(guarded), "gate")
    return guarded
