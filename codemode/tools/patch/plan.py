"""Checking and computing every operation of a patch in memory, before any write.

The plan walks the operations in order over an in-memory view of the files it touched
(so an Add followed by an Update of the same file, or a Move onto a file added
earlier, behave as if applied one by one), collecting every problem rather than
stopping at the first, so one error message lists all that must be fixed. The result
is the final content of each touched file, the originals to restore on rollback, the
changes to report and their diff.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from codemode.hostfs.beneath import default_mode
from codemode.tools.context import ToolContext, ToolError, store_for
from codemode.tools.fs.reading import NotRegular
from codemode.tools.fs.text import Encoding, decode, encode, is_binary
from codemode.tools.patch import diff as diffs
from codemode.tools.patch.edit import ChunkProblems, Edit, apply_chunks, split_lines
from codemode.tools.patch.errors import PatchError
from codemode.tools.patch.model import AddFile, Change, DeleteFile, Patch, UpdateFile
from codemode.tools.path_chars import path_problem
from codemode.tools.store import MAX_READ_BYTES, FileStore
from codemode.tools.store.commit import Original, Removal, Write

# Files over this size are not patched (read_file's limit, which the store enforces).
MAX_FILE_BYTES = MAX_READ_BYTES
# Problems listed in one error; past this the rest are counted, to spare the context.
_MAX_PROBLEMS = 10
_RETRY = (
    "Re-read the files named above, copy context lines exactly as they are, and send "
    "the whole patch again (none of it was applied)."
)


@dataclass
class _Entry:
    """A file as the plan sees it: text None means absent."""

    text: str | None
    mode: int | None
    encoding: Encoding = "utf-8"


# A patch read from bytes holds what is not UTF-8 as surrogate escapes (U+DC80-U+DCFF);
# in a Latin-1 file each stands for the byte it escapes.
_ESCAPED_BYTES = {code: chr(code - 0xDC00) for code in range(0xDC80, 0xDD00)}


def _encode(entry: _Entry, shown: str) -> bytes:
    assert entry.text is not None
    if entry.encoding == "latin-1":
        return encode(entry.text.translate(_ESCAPED_BYTES), "latin-1", shown)
    if entry.encoding == "utf-8":
        return entry.text.encode("utf-8", "surrogateescape")
    return encode(entry.text, entry.encoding, shown)  # its byte order mark put back


@dataclass
class Plan:
    """A checked patch, ready to commit: what to remove and write, what to restore if a
    write fails, and what to report."""

    changes: list[Change] = field(default_factory=list)
    diff: str = ""
    removals: list[Removal] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    originals: dict[Path, Original] = field(default_factory=dict)


class _DirectoryMarker:
    """Stands for a path that is a directory (which no operation may replace)."""


_DIRECTORY = _DirectoryMarker()


class Planner:
    """Walks a patch's operations over an in-memory view of the files they touch."""

    def __init__(self, base: Path, ctx: ToolContext, store: FileStore) -> None:
        self.base = base
        self.ctx = ctx
        self.store = store
        self.view: dict[Path, _Entry] = {}
        self.disk: dict[Path, Original | None] = {}
        self.shown: dict[Path, str] = {}
        self.problems: list[str] = []
        self.chunk_failed = False
        self.changes: list[Change] = []
        self.diffs: list[str] = []
        # Each path's location with symlinks resolved, found when it was read.
        self.real: dict[Path, Path] = {}

    # --- paths and files ---------------------------------------------------------------

    def resolve(self, raw: str, header: str) -> Path | None:
        problem = path_problem(raw)
        if problem is not None:
            # Quoted, so the message shows the character instead of acting on it.
            self.problems.append(
                f"{header}: {raw!r} is refused: {problem}; a path may not hold control "
                "characters, line separators or bidirectional formatting characters."
            )
            return None
        if raw.endswith(("/", os.sep)):
            self.problems.append(f"'{header}: {raw}' names a directory, not a file.")
            return None
        candidate = Path(raw).expanduser()
        full = candidate if candidate.is_absolute() else self.base / candidate
        try:
            path = self.ctx.resolve_writable(full)
        except ToolError as refusal:
            # Say what refused it: the sandbox mode, a protected folder, or the roots.
            reason = str(refusal)
            if any(w in reason for w in ("outside the writable roots", "outside the workspace")):
                reason = (
                    f"is outside the workspace ({self.ctx.workspace}). Paths are relative "
                    "to the working directory and may not leave the workspace."
                )
            else:
                reason = f"is refused: {reason}."
            self.problems.append(f"'{header}: {raw}' {reason}")
            return None
        self.shown.setdefault(path, self.display(path))
        return path

    def display(self, path: Path) -> str:
        try:
            return path.relative_to(self.base).as_posix()
        except ValueError:
            return self.ctx.display(path)

    def current(self, path: Path) -> _Entry | _DirectoryMarker:
        if path in self.view:
            return self.view[path]
        original = self.read(path)
        if original is _DIRECTORY:
            return _DIRECTORY
        assert not isinstance(original, _DirectoryMarker)
        if original is None:
            return _Entry(None, None)
        # As read_file reads it: UTF-8, or Latin-1 when it is not (every byte kept).
        text, encoding = decode(original.data)
        return _Entry(text, original.mode, encoding)

    def read(self, path: Path) -> Original | _DirectoryMarker | None:
        """The file as the store has it (cached): its bytes and mode, None if absent."""
        if path in self.disk:
            return self.disk[path]
        shown = self.shown.get(path, str(path))
        try:
            info = self.store.stat(path)
            if info is None:
                self.disk[path] = None
                return None
            if info.kind == "dir":
                return _DIRECTORY
            self.real[path] = info.real
            data = self.store.read(path, shown)
        except (FileNotFoundError, NotADirectoryError):
            self.disk[path] = None
            return None
        except NotRegular as exc:
            raise PatchError(f"{exc}.") from None
        except ToolError as exc:
            raise PatchError(f"{exc}.") from None
        except OSError as exc:
            raise PatchError(f"{shown}: cannot read it: {exc.strerror or exc}.") from None
        original = Original(data, info.mode)
        self.disk[path] = original
        return original

    def blocked_by_file(self, path: Path) -> Path | None:
        """An ancestor of ``path`` that is (or will be) a file, which blocks creating it."""
        for parent in path.parents:
            if parent in self.view:
                if self.view[parent].text is not None:
                    return parent
                continue
            info = self.store.stat(parent)
            if info is None:
                continue
            return None if info.kind == "dir" else parent
        return None

    def text_of(self, path: Path, header: str) -> str | None:
        entry = self.current(path)
        shown = self.shown[path]
        if isinstance(entry, _DirectoryMarker):
            self.problems.append(f"'{header}: {shown}': {shown} is a directory.")
            return None
        if entry.text is None:
            hint = " To create it, use '*** Add File:'." if header.endswith("Update File") else ""
            self.problems.append(f"'{header}: {shown}': no such file.{hint}")
            return None
        if is_binary(entry.text):
            self.problems.append(f"'{header}: {shown}': {shown} is a binary file.")
            return None
        return entry.text

    def creatable(self, path: Path, header: str) -> bool:
        shown = self.shown[path]
        if isinstance(self.current(path), _DirectoryMarker):
            self.problems.append(f"'{header}: {shown}': {shown} is a directory.")
            return False
        blocker = self.blocked_by_file(path)
        if blocker is not None:
            self.problems.append(
                f"'{header}: {shown}': cannot create it, {self.display(blocker)} is a file."
            )
            return False
        return True

    # --- operations ---------------------------------------------------------------------

    def add(self, op: AddFile) -> None:
        header = "*** Add File"
        path = self.resolve(op.path, header)
        if path is None or not self.creatable(path, header):
            return
        before = self.current(path)
        mode = before.mode if isinstance(before, _Entry) else None
        # A file added over an existing one keeps its encoding, as write_file does.
        encoding = before.encoding if isinstance(before, _Entry) and before.text else "utf-8"
        text = "".join(f"{line}\n" for line in op.lines)
        shown = self.shown[path]
        new_lines = split_lines(text)
        if isinstance(before, _Entry) and before.text is not None:
            old_lines = split_lines(before.text)
            edit = Edit(0, old=old_lines, new=new_lines)
            self.diffs.append(diffs.update_diff(shown, shown, old_lines, [edit]))
        else:
            self.diffs.append(diffs.added_file_diff(shown, new_lines))
        self.view[path] = _Entry(text, mode, encoding)
        self.changes.append(Change(shown, "add"))

    def delete(self, op: DeleteFile) -> None:
        header = "*** Delete File"
        path = self.resolve(op.path, header)
        if path is None:
            return
        entry = self.current(path)
        shown = self.shown[path]
        if isinstance(entry, _DirectoryMarker):
            self.problems.append(
                f"'{header}: {shown}': {shown} is a directory; only files can be deleted."
            )
            return
        if entry.text is None:
            self.problems.append(f"'{header}: {shown}': no such file.")
            return
        self.diffs.append(diffs.deleted_file_diff(shown, split_lines(entry.text)))
        self.view[path] = _Entry(None, None)
        self.changes.append(Change(shown, "delete"))

    def update(self, op: UpdateFile) -> None:
        header = "*** Update File"
        path = self.resolve(op.path, header)
        dest = self.resolve(op.move_to, "*** Move to") if op.move_to is not None else None
        if path is None or (op.move_to is not None and dest is None):
            return
        text = self.text_of(path, header)
        if text is None:
            return
        shown = self.shown[path]
        try:
            edited = apply_chunks(text, op.chunks, shown)
        except ChunkProblems as exc:
            self.problems.extend(exc.problems)
            self.chunk_failed = True
            return
        entry = self.current(path)
        assert isinstance(entry, _Entry)
        if dest is None or dest == path:
            self.diffs.append(diffs.update_diff(shown, shown, edited.old_lines, edited.edits))
            self.view[path] = _Entry(edited.text, entry.mode, entry.encoding)
            self.changes.append(Change(shown, "update"))
            return
        if not self.creatable(dest, "*** Move to"):
            return
        dest_shown = self.shown[dest]
        self.diffs.append(diffs.update_diff(shown, dest_shown, edited.old_lines, edited.edits))
        self.view[path] = _Entry(None, None)
        self.view[dest] = _Entry(edited.text, entry.mode, entry.encoding)
        self.changes.append(Change(shown, "move", move_to=dest_shown))

    # --- the plan -----------------------------------------------------------------------

    def plan(self, patch: Patch) -> Plan:
        for op in patch.operations:
            if isinstance(op, AddFile):
                self.add(op)
            elif isinstance(op, DeleteFile):
                self.delete(op)
            else:
                self.update(op)
        if self.problems:
            problems = self.problems[:_MAX_PROBLEMS]
            if len(self.problems) > _MAX_PROBLEMS:
                problems.append(f"... and {len(self.problems) - _MAX_PROBLEMS} more problems.")
            if self.chunk_failed:
                problems.append(_RETRY)
            raise PatchError(problems)
        result = Plan(changes=self.changes, diff="".join(self.diffs))
        for path, entry in self.view.items():
            original = self.disk.get(path)
            shown = self.shown.get(path, str(path))
            if entry.text is None:
                if original is not None:
                    result.removals.append(Removal(path, shown))
                    result.originals[path] = original
                continue
            try:
                data = _encode(entry, shown)
            except ToolError as exc:
                raise PatchError(f"{exc}.") from None
            mode = entry.mode if entry.mode is not None else default_mode()
            if original is not None and original.data == data and original.mode == mode:
                continue
            # Through a symlink to its target, as found when the file was read.
            target = self.real.get(path, path)
            if original is not None:
                result.originals[target] = original
            result.writes.append(Write(target, data, mode, shown))
        return result


def make_plan(patch: Patch, base: Path, ctx: ToolContext, store: FileStore | None = None) -> Plan:
    """Check every operation of ``patch`` against the files under ``base`` (as ``store``
    has them: by default the session's, ``store_for(ctx)``) and compute the result
    in memory; raises PatchError listing every problem found."""
    return Planner(base, ctx, store or store_for(ctx)).plan(patch)
