"""``EditorStore``: the user's editor buffers (ACP ``fs/read_text_file`` and
``fs/write_text_file``), layered over another store (the disk).

An editor driving us over ACP knows about unsaved changes and wants to see edits land,
so reads and writes of text go through it when it offers them. What an editor cannot
do stays with the store below: telling what is at a path, removing a file, and
writing bytes that are not UTF-8 text (a Latin-1 file keeps every byte on disk rather
than being re-encoded by the editor). Every check is the store below's: a path that
store would refuse to write, or to read (the agent's own ``/proc``, a device), is
refused before the editor is asked, so an editor session opens no door.

The store's methods block (the file tools call them from a worker thread); each one
hands its request to the event loop the ACP connection lives on and waits for the
answer, at most ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Coroutine, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard
from codemode.tools.fs.reading import TooBig
from codemode.tools.store import MAX_READ_BYTES, DirItem, FileInfo, FileStore, read_modify_write

if TYPE_CHECKING:
    from codemode.tools.client import ToolClient
    from codemode.tools.store.commit import Original, Removal, Write

T = TypeVar("T")

# An editor that has not answered a file request in this long is taken to be gone.
EDITOR_TIMEOUT_S = 120.0


class EditorStore:
    """Text through the editor's buffers, the rest through ``base``."""

    def __init__(
        self, client: ToolClient, base: FileStore, *, timeout: float = EDITOR_TIMEOUT_S
    ) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ToolError(
                "the editor's files can only be reached from the session's event loop"
            ) from None
        self.client = client
        self.base = base
        self.timeout = timeout

    def _ask(self, request: Callable[[], Coroutine[object, object, T]], shown: str) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            # Waiting here for the loop we are blocking would never end.
            raise RuntimeError("EditorStore blocks: call it from a worker thread")
        future = asyncio.run_coroutine_threadsafe(request(), self._loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise ToolError(
                f"{shown}: the editor did not answer within {self.timeout:g} s"
            ) from None
        except ToolError:
            raise
        except Exception as exc:  # the editor's error, as JSON-RPC brought it
            raise ToolError(f"{shown}: the editor refused: {exc}") from None

    # --- reading ---------------------------------------------------------------------

    def stat(self, path: Path) -> FileInfo | None:
        return self.base.stat(path)

    def overlaid(self) -> Mapping[Path, bytes | None]:
        return {}

    def entries(self, path: Path, limit: int | None = None) -> list[DirItem]:
        return self.base.entries(path, limit)

    def read(self, path: Path, shown: str) -> bytes:
        info = self.base.stat(path)
        if info is None:
            # Nothing on disk: nothing to read (a buffer the user never saved is not a
            # file the tools can see yet).
            raise FileNotFoundError(errno.ENOENT, "no such file", shown)
        if (
            info.kind != "file"
            or guard.read_refusal(info.real) is not None
            or info.size > MAX_READ_BYTES  # (a sparse terabyte: the editor would try)
            or not self.client.reads_files
        ):
            return self.base.read(path, shown)  # its own refusal, or the disk's bytes
        text = self._ask(partial(self.client.read_text, path), shown)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError(f"{shown}: the editor's text is not valid Unicode") from None
        if len(data) > MAX_READ_BYTES:
            raise TooBig(f"{shown} is over the {MAX_READ_BYTES} byte limit")
        return data

    # --- writing ---------------------------------------------------------------------

    def writable(self, path: Path, shown: str, *, grant: Path | None = None) -> None:
        self.base.writable(path, shown, grant=grant)

    def write(self, path: Path, data: bytes, shown: str, *, grant: Path | None = None) -> bool:
        self.base.writable(path, shown, grant=grant)
        info = self.base.stat(path)
        if info is not None and info.kind == "dir":
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
        text = _text(data)
        if text is None or not self.client.writes_files:
            return self.base.write(path, data, shown, grant=grant)
        self._ask(partial(self.client.write_text, path, text), shown)
        return info is None

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
        self.base.remove(path, shown)

    def commit(
        self,
        removals: Sequence[Removal],
        writes: Sequence[Write],
        originals: Mapping[Path, Original],
    ) -> None:
        """One step at a time, each undone (newest first) if a later one fails: an
        editor has no transaction to offer. A file the patch created is removed again
        on disk; an editor that kept it only as an unsaved buffer keeps that buffer."""
        from codemode.tools.store.commit import roll_back

        undo: list[Callable[[], object]] = []
        current = ""
        try:
            for removal in removals:
                current = removal.shown
                self.remove(removal.path, removal.shown)
                undo.append(partial(self._put, removal.path, originals[removal.path].data))
            for write in writes:
                current = write.shown
                created = self.write(write.path, write.data, write.shown)
                original = originals.get(write.path)
                if created or original is None:
                    undo.append(partial(self._drop, write.path))
                else:
                    undo.append(partial(self._put, write.path, original.data))
        except (OSError, ToolError) as exc:
            roll_back(undo, current, exc)

    def _put(self, path: Path, data: bytes) -> None:
        self.write(path, data, str(path))

    def _drop(self, path: Path) -> None:
        try:
            self.remove(path, str(path))
        except FileNotFoundError:
            pass  # the editor kept it as a buffer only


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
