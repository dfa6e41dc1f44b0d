"""``DryRunStore``: a dry run's overlay, layered over another store.

Writes and removals are recorded in the dry run (``codemode.tools.dry_run.DryRun``)
instead of reaching the store below; reads and stats see the recorded changes first,
then that store. Every write passes the store below's own check and, since nothing is
walked for real, the file tools' protected-path rule (``codemode.tools.fs.guard``) on
the path with symlinks resolved: a dry run shows only what a real run could write.
"""

from __future__ import annotations

import errno
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.hostfs.beneath import default_mode
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard
from codemode.tools.fs.reading import NotRegular
from codemode.tools.store import DirItem, FileInfo, FileStore, WriteRefused, read_modify_write

if TYPE_CHECKING:
    from codemode.tools.dry_run import DryRun
    from codemode.tools.store.commit import Original, Removal, Write


class DryRunStore:
    """Changes recorded in ``changes``, over ``base``."""

    def __init__(self, changes: DryRun, base: FileStore, workspace: Path) -> None:
        self.changes = changes
        self.base = base
        self.workspace = workspace.resolve()

    def _holds_records(self, key: Path) -> bool:
        """Whether a file recorded (and not removed) lies below ``key``: it is then a
        directory in the dry run, made on the way to that file."""
        return any(
            k.is_relative_to(key) and k != key and self.changes.content(k) is not None
            for k in self.changes.recorded()
        )

    # --- reading ---------------------------------------------------------------------

    def read(self, path: Path, shown: str) -> bytes:
        if path in self.changes:
            data = self.changes.content(path)
            if data is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", shown)
            return data
        if self.base.stat(path) is None and self._holds_records(path.resolve()):
            raise NotRegular(shown, stat.S_IFDIR)
        return self.base.read(path, shown)

    def stat(self, path: Path) -> FileInfo | None:
        key = path.resolve()
        below = self.base.stat(path)
        if path in self.changes:
            data = self.changes.content(path)
            if data is None:
                return None
            mode = below.mode if below is not None and below.kind == "file" else default_mode()
            return FileInfo("file", mode, len(data), key)
        if below is None and self._holds_records(key):
            return FileInfo("dir", 0o755, 0, key)
        return below

    def overlaid(self) -> Mapping[Path, bytes | None]:
        below = self.base.overlaid()
        mine = {key: self.changes.content(key) for key in self.changes.recorded()}
        return {**below, **mine}

    def entries(self, path: Path, limit: int | None = None) -> list[DirItem]:
        """The store below's entries (``limit`` of them at most) with the recorded
        changes applied: files written appear (with the folders made on the way), files
        removed are gone."""
        key = path.resolve()
        try:
            found = {item.name: item for item in self.base.entries(path, limit)}
        except FileNotFoundError:
            if not self._holds_records(key):
                raise
            found = {}
        for recorded in self.changes.recorded():
            if not recorded.is_relative_to(key) or recorded == key:
                continue
            name = recorded.relative_to(key).parts[0]
            data = self.changes.content(recorded)
            if recorded.parent != key:
                if data is not None and name not in found:
                    found[name] = DirItem(name, "dir", None)
            elif data is None:
                found.pop(name, None)
            elif found.get(name, DirItem(name, "file", None)).kind != "symlink":
                found[name] = DirItem(name, "file", len(data))
        return list(found.values())

    # --- writing ---------------------------------------------------------------------

    def writable(self, path: Path, shown: str, *, grant: Path | None = None) -> None:
        self.base.writable(path, shown, grant=grant)
        target = path.resolve()
        inside = target.is_relative_to(self.workspace)
        below = target.relative_to(self.workspace) if inside else target
        reason = guard.write_refusal(below.parts)
        if reason is not None:
            raise WriteRefused(f"refusing to write {shown}: {reason}")

    def _before(self, path: Path) -> bytes | None:
        try:
            return self.base.read(path, str(path))
        except (OSError, ToolError):
            return None

    def write(self, path: Path, data: bytes, shown: str, *, grant: Path | None = None) -> bool:
        self.writable(path, shown, grant=grant)
        key = path.resolve()
        for parent in key.parents:
            info = self.stat(parent)
            if info is not None and info.kind == "file":
                raise ToolError(f"cannot create {shown}: {parent} is a file")
            if info is not None:
                break
        now = self.stat(key)
        if now is not None and now.kind == "dir":
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
        self.changes.record(key, data, lambda: self._before(key))
        return now is None

    def replace(
        self,
        path: Path,
        shown: str,
        change: Callable[[bytes | None], bytes],
        *,
        grant: Path | None = None,
    ) -> tuple[bytes, bool]:
        return read_modify_write(self, path, shown, change, grant)

    def remove(self, path: Path, shown: str) -> None:
        self.writable(path, shown)
        key = path.resolve()
        self.changes.record(key, None, lambda: self._before(key))

    def commit(
        self,
        removals: Sequence[Removal],
        writes: Sequence[Write],
        originals: Mapping[Path, Original],
    ) -> None:
        """Record every removal and write, or (when one is refused) none of them."""
        from codemode.tools.store.commit import CommitFailed

        state = self.changes.state()
        current = ""
        try:
            for removal in removals:
                current = removal.shown
                self.remove(removal.path, removal.shown)
            for write in writes:
                current = write.shown
                self.write(write.path, write.data, write.shown)
        except (OSError, ToolError) as exc:
            self.changes.restore(state)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CommitFailed(
                [f"Writing {current} failed: {reason}. Nothing was recorded."]
            ) from None
