"""The file-store seam: where every file tool reads and writes files.

A ``FileStore`` is the files as one session sees them. Three layers exist:

- ``DiskStore`` (``disk``): the real files, through the race-free walk of
  ``codemode.tools.fs``; writes only inside the writable roots, never a protected path;
- the dry-run overlay (``overlay.DryRunStore``): records writes in memory
  over another store, so a dry run changes nothing and can show its diff;
- editor buffers (``editor.EditorStore``): the user's editor over ACP
  (``fs/read_text_file``, ``fs/write_text_file``), unsaved changes included, layered
  over disk for what an editor cannot do (stat, remove, bytes that are not text).

``codemode.tools.context.store_for(ctx)`` gives a handler its session's store
(``ToolContext.store``, else these layers as the context implies them); read_file,
write_file, list_dir, edit and apply_patch all go through it, and grep and glob search
the disk with what the store holds over it (``overlaid``), so a dry run sees every
file tool the same way.

The methods are blocking: the tools call them from a worker thread
(``asyncio.to_thread``), as they do all filesystem work, so the event loop stays free.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from codemode.tool_terms.errors import ToolError

if TYPE_CHECKING:
    from codemode.tools.store.changes import Original, Removal, Write

# The most a file tool reads of one file (read_file's documented 20 MB limit).
MAX_READ_BYTES = 20 * 1024 * 1024

FileKind = Literal["file", "dir", "other"]


@dataclass(frozen=True)
class FileInfo:
    """What is at a path, symlinks followed: its kind, permission bits, size, and
    ``real``, the path with every symlink resolved."""

    kind: FileKind
    mode: int
    size: int
    real: Path


EntryKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class DirItem:
    """One entry of a directory, symlinks not followed; ``size`` for files only."""

    name: str
    kind: EntryKind
    size: int | None


class WriteRefused(ToolError):
    """A write refused before anything was touched (``FileStore.writable``)."""


class OutsideRoots(WriteRefused):
    """A write refused only because the path is outside the writable roots: the one
    refusal the user may be asked to lift (``codemode.tools.write_approval``)."""


class FileStore(Protocol):
    """The files as a session sees them (see the module docstring)."""

    def read(self, path: Path, shown: str) -> bytes:
        """The bytes of the regular file at ``path`` (at most ``MAX_READ_BYTES``).

        Raises FileNotFoundError or NotADirectoryError (nothing there), NotRegular
        (a directory, device, FIFO...), TooBig, or ToolError (refused, or the editor
        failed)."""
        ...

    def stat(self, path: Path) -> FileInfo | None:
        """What is at ``path`` (symlinks followed), None if nothing is."""
        ...

    def overlaid(self) -> Mapping[Path, bytes | None]:
        """The files this store holds other than the disk does, by resolved path
        (None: removed), for the searches, which walk the disk and then this. Empty for
        the disk and for the editor (which does not say which buffers are unsaved: a
        search there sees the saved files)."""
        ...

    def entries(self, path: Path, limit: int | None = None) -> list[DirItem]:
        """The entries of the directory at ``path``, in no particular order; no more
        than ``limit`` of them read from the disk (a folder a command filled with
        millions of entries costs no more). Raises OSError (FileNotFoundError,
        NotADirectoryError, PermissionError...)."""
        ...

    def writable(self, path: Path, shown: str, *, grant: Path | None = None) -> None:
        """Raise WriteRefused (OutsideRoots when only the roots refuse it) unless
        ``path`` may be written. ``grant`` is a directory the user approved for this
        write (``codemode.tools.write_approval``)."""
        ...

    def replace(
        self,
        path: Path,
        shown: str,
        change: Callable[[bytes | None], bytes],
        *,
        grant: Path | None = None,
    ) -> tuple[bytes, bool]:
        """Read, change and write one file: ``change`` gets what the file holds now
        (None: no file, or one too big to look at) and returns the new bytes, which are
        written. Returns them and whether the file was created. Checks ``writable``
        first; raises IsADirectoryError for a directory, ToolError for a device."""
        ...

    def write(self, path: Path, data: bytes, shown: str, *, grant: Path | None = None) -> bool:
        """Replace (or create, with missing parent directories) the file at ``path``;
        True if it did not exist. Checks ``writable`` first."""
        ...

    def remove(self, path: Path, shown: str) -> None:
        """Delete the file at ``path`` (a symlink itself, never its target). Checks
        ``writable`` first."""
        ...

    def commit(
        self,
        removals: Sequence[Removal],
        writes: Sequence[Write],
        originals: Mapping[Path, Original],
    ) -> None:
        """Remove then write files, all or nothing: on any failure what was done is
        undone (from ``originals``, the contents read while planning) and
        ``commit.CommitFailed`` is raised."""
        ...


def existing(store: FileStore, path: Path, shown: str) -> bytes | None:
    """What ``store`` holds at ``path`` for a file about to be replaced: None if there
    is none (or it is too big to look at); refuses a directory or a device."""
    from codemode.tools.fs.reading import NotRegular, TooBig

    try:
        return store.read(path, shown)
    except (FileNotFoundError, NotADirectoryError, TooBig):
        return None
    except NotRegular as exc:
        if exc.is_dir:
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown) from None
        raise ToolError(f"refusing to replace {exc}") from None


def read_modify_write(
    store: FileStore,
    path: Path,
    shown: str,
    change: Callable[[bytes | None], bytes],
    grant: Path | None,
) -> tuple[bytes, bool]:
    """``FileStore.replace`` from the store's own check, read and write."""
    store.writable(path, shown, grant=grant)
    data = change(existing(store, path, shown))
    return data, store.write(path, data, shown, grant=grant)
