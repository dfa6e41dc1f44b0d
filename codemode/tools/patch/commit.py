"""Writing a planned patch to disk, all or nothing.

Every file is written to a temporary file in its own directory and renamed over the
target, so no file is ever seen half-written. Each step leaves an undo action; if any
step fails, the steps already taken are undone in reverse (files restored from the
copies read while planning, created files and directories removed), so the workspace
ends as it started. Files are not fsynced: the guarantee is against failures of the
patch, not against power loss.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

from codemode.tools.patch.errors import PatchError


@dataclass
class Write:
    path: Path  # the file written (a symlink's target, for files reached through one)
    data: bytes
    mode: int
    shown: str  # the path as the patch named it, for messages


@dataclass
class Removal:
    path: Path
    shown: str


@dataclass
class Original:
    """A file's content and mode before the patch, to restore on rollback."""

    data: bytes
    mode: int


@cache
def default_mode() -> int:
    """Permission bits for new files: 0o666 less the process umask."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc: read the umask by setting it, then put it back
    os.umask(mask)
    return 0o666 & ~mask


def commit(removals: list[Removal], writes: list[Write], originals: dict[Path, Original]) -> None:
    """Remove then write files; on any failure undo what was done and raise PatchError."""
    undo: list[Callable[[], object]] = []
    current = ""
    try:
        for removal in removals:
            current = removal.shown
            os.unlink(removal.path)
            undo.append(partial(_restore, removal.path, originals[removal.path]))
        for write in writes:
            current = write.shown
            for created in _make_parents(write.path.parent):
                undo.append(partial(os.rmdir, created))
            _replace(write.path, write.data, write.mode)
            original = originals.get(write.path)
            undo.append(
                partial(_restore, write.path, original)
                if original is not None
                else partial(os.unlink, write.path)
            )
    except OSError as exc:
        failed = []
        for step in reversed(undo):
            try:
                step()
            except OSError as undo_exc:
                failed.append(f"{undo_exc.filename}: {undo_exc.strerror or undo_exc}")
        reason = exc.strerror or str(exc)
        problem = f"Writing {current} failed: {reason}."
        if not failed:
            raise PatchError(f"{problem} The files already written were restored.") from None
        raise PatchError(
            [problem, "Restoring these files also failed; check them:\n" + "\n".join(failed)],
            headline="apply_patch: the patch failed partway and could not be fully undone.",
        ) from None


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and missing ancestors; return those created, outermost first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
    return list(reversed(missing))


def _replace(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".apply_patch-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _restore(path: Path, original: Original) -> None:
    _replace(path, original.data, original.mode)
