"""File tools: ``read_file``, ``write_file`` and ``list_dir``.

``read_file`` and ``write_file`` go through the session's file store
(``codemode.tools.store.store_for``): the disk, a dry run's
overlay, or the editor's buffers. Reads may look anywhere (the model often needs a
system header or a sibling project) but take regular files only, up to a byte cap;
writes are confined to the writable roots, which the store enforces (a write outside
them may be put to the user: ``codemode.tools.write_approval``). Contents round-trip
byte for byte (``codemode.tools.fs.text``). The blocking filesystem work runs in a
worker thread so the event loop stays responsive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import NotRegular, TooBig
from codemode.tools.fs.text import (
    Encoding,
    check_no_new_replacement,
    decode,
    encode,
    is_binary,
)
from codemode.tools.store import (
    MAX_READ_BYTES,
    EntryKind,
    FileStore,
    OutsideRoots,
    WriteRefused,
)

MAX_LIST_ENTRIES = 2000


def looks_binary(data: bytes) -> bool:
    """Whether a file holding ``data`` is binary: a NUL near the start of its text (so a
    UTF-16 file, whose bytes are half NULs, is text)."""
    return is_binary(decode(data)[0])


# --- read_file -------------------------------------------------------------------------


class ReadFileArgs(StrictArgs):
    path: str = Field(
        description="File to read, relative to the workspace or absolute. "
        "Files outside the workspace may be read."
    )
    offset: int | None = Field(
        default=None,
        ge=1,
        description="1-based number of the first line to return. Defaults to 1.",
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description="Most lines to return. Omit to read to the end of the file.",
    )


class ReadFileResult(ToolResult):
    path: str = Field(description="The file, relative to the workspace when inside it.")
    content: str = Field(
        description="The selected lines joined together, each with its original line ending."
    )
    start_line: int = Field(description="1-based number of the first line returned (0 if none).")
    end_line: int = Field(description="1-based number of the last line returned (0 if none).")
    total_lines: int = Field(description="How many lines the whole file has.")
    truncated: bool = Field(
        description="True when the file continues after end_line; read on with offset."
    )
    encoding: Encoding = Field(
        description='"utf-8"; "utf-16le", "utf-16be", "utf-32le" or "utf-32be" for a file '
        'that starts with that byte order mark (not part of content); or "latin-1" for a '
        "file that is not valid UTF-8 (each byte is then one character, U+0000-U+00FF, so "
        "every byte is kept). write_file, edit and apply_patch write a file back in the "
        "encoding it had, byte order mark included."
    )


def _read_bytes(path: Path, shown: str, store: FileStore) -> bytes:
    try:
        return store.read(path, shown)
    except FileNotFoundError:
        raise ToolError(f"read_file: no such file: {shown}") from None
    except NotADirectoryError:
        raise ToolError(f"read_file: no such file: {shown} (a parent is not a directory)") from None
    except IsADirectoryError:
        raise ToolError(f"read_file: {shown} is a directory; use tools.list_dir") from None
    except NotRegular as exc:
        if exc.is_dir:
            raise ToolError(f"read_file: {shown} is a directory; use tools.list_dir") from None
        raise ToolError(f"read_file: {exc}; only regular files can be read") from None
    except TooBig:
        raise ToolError(
            f"read_file: {shown} is over the {MAX_READ_BYTES} byte limit; "
            "search it with tools.grep or read part of it with tools.shell"
        ) from None
    except ToolError as exc:
        raise ToolError(f"read_file: {exc}") from None
    except OSError as exc:  # a name too long, a file the kernel will not read...
        raise ToolError(f"read_file: cannot read {shown}: {exc.strerror or exc}") from None


def _read_file_sync(args: ReadFileArgs, ctx: ToolContext, store: FileStore) -> ReadFileResult:
    path = ctx.resolve(args.path)
    shown = ctx.display(path)
    data = _read_bytes(path, shown, store)
    text, encoding = decode(data)
    if is_binary(text):
        raise ToolError(
            f"read_file: {shown} looks like a binary file (it holds NUL characters); "
            "only text files can be read"
        )
    return _window(text, shown, args, encoding)


def _line_start(text: str, number: int) -> int:
    """Where line ``number`` (1-based) of ``text`` starts; ``len(text)`` past the end.
    Counted in C a block at a time: a file of millions of lines is never split into a
    string per line."""
    need = number - 1
    pos = 0
    while need > 0 and pos < len(text):
        block_end = min(len(text), pos + _BLOCK)
        found = text.count("\n", pos, block_end)
        if found < need:
            need -= found
            pos = block_end
            continue
        for _ in range(need):
            pos = text.index("\n", pos) + 1
        return pos
    return pos if need <= 0 else len(text)


_BLOCK = 1 << 16


def _window(
    text: str, shown: str, args: ReadFileArgs, encoding: Encoding = "utf-8"
) -> ReadFileResult:
    total = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    first = args.offset or 1
    # An empty file still has a "line 1" to start at, so offset 1 is always valid.
    if first > max(total, 1):
        raise ToolError(
            f"read_file: offset {first} is past the end of {shown}, "
            f"which has {total} line{'' if total == 1 else 's'}"
        )
    stop = total if args.limit is None else min(total, first - 1 + args.limit)
    start = _line_start(text, first)
    end = len(text) if stop >= total else _line_start(text, stop + 1)
    selected = stop >= first
    return ReadFileResult(
        path=shown,
        content=text[start:end],
        start_line=first if selected else 0,
        end_line=stop if selected else 0,
        total_lines=total,
        truncated=stop < total,
        encoding=encoding,
    )


async def read_file(args: ReadFileArgs, ctx: ToolContext) -> ReadFileResult:
    """Read a text file, optionally a window of its lines (through the session's store:
    a dry run's own writes, an editor's unsaved buffer)."""
    return await asyncio.to_thread(_read_file_sync, args, ctx, store_for(ctx))


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file. Returns the whole file unless offset/limit pick a range "
        "of lines; total_lines and truncated tell you whether there is more. A file that "
        "is not valid UTF-8 is read as Latin-1, one with a UTF-16 or UTF-32 byte order mark "
        "in that encoding (encoding says which), so no byte is lost. "
        "Binary files, files over 20 MB and anything but a regular file (devices, "
        "FIFOs, sockets) are refused."
    ),
    args_model=ReadFileArgs,
    result_model=ReadFileResult,
    handler=read_file,
    effects=frozenset({"read"}),
    acp_kind="read",
    hook_names=("Read",),
    render=rendering.read_file,
    core=True,
)


# --- write_file ------------------------------------------------------------------------


class WriteFileArgs(StrictArgs):
    path: str = Field(
        description="File to write, relative to the workspace. Missing parent directories "
        "are created. Paths outside the workspace are refused."
    )
    content: str = Field(
        description="The complete new contents of the file; it replaces what was there."
    )
    encoding: Encoding | None = Field(
        default=None,
        description="How to write the text: an existing file keeps its encoding (as "
        'read_file reported it), a new one is "utf-8". Set it to convert a file (the '
        "UTF-16 and UTF-32 encodings are written with a byte order mark).",
    )


class WriteFileResult(ToolResult):
    path: str = Field(description="The file written, relative to the workspace.")
    bytes_written: int = Field(description="Size of the new file in bytes.")
    created: bool = Field(description="True if the file did not exist before.")


def _old_text(data: bytes | None) -> tuple[str | None, Encoding | None]:
    if data is None:
        return None, None
    text, encoding = decode(data)
    # A binary file replaced by text has no text encoding to keep: the new one is UTF-8.
    return text, None if is_binary(text) else encoding


def _encoded(args: WriteFileArgs, old: bytes | None, shown: str) -> bytes:
    """The bytes to write: the content in the file's encoding (or the one asked for),
    refusing U+FFFD put into a file that had none."""
    old_text, old_encoding = _old_text(old)
    encoding: Encoding = args.encoding or old_encoding or "utf-8"
    check_no_new_replacement(args.content, old_text, shown)
    return encode(args.content, encoding, shown)


# What a write puts in a file given what it holds now (None: no file, or one too big to
# look at) and the path as shown; raises ToolError to write nothing.
Change = Callable[[bytes | None, str], bytes]


def _write_sync(
    tool: str,
    ctx: ToolContext,
    store: FileStore,
    path: Path,
    named: str,
    change: Change,
    grant: Path | None,
) -> WriteFileResult:
    shown = ctx.display(path)
    try:
        data, created = store.replace(path, named, lambda old: change(old, shown), grant=grant)
    except WriteRefused:
        raise  # says which path and why already
    except IsADirectoryError:
        raise ToolError(f"{tool}: {shown} is a directory") from None
    except NotADirectoryError as exc:
        raise ToolError(f"{tool}: cannot create {shown}: {exc.filename} is a file") from None
    except ToolError as exc:
        raise ToolError(f"{tool}: {exc}") from None
    except OSError as exc:  # a name too long, a full disk, a read-only filesystem...
        raise ToolError(f"{tool}: cannot write {shown}: {exc.strerror or exc}") from None
    return WriteFileResult(path=shown, bytes_written=len(data), created=created)


async def write_file(args: WriteFileArgs, ctx: ToolContext) -> WriteFileResult:
    """Create or overwrite a file inside the workspace, atomically, through the session's
    store; a write outside the writable roots is put to the user when someone can
    answer (``codemode.tools.write_approval``)."""
    return await write_through(args, ctx, "write_file")


async def write_through(args: WriteFileArgs, ctx: ToolContext, tool: str) -> WriteFileResult:
    """``write_file``'s work, with ``tool`` named in what the user is asked."""
    return await write_changed(ctx, tool, args.path, lambda old, shown: _encoded(args, old, shown))


async def write_changed(ctx: ToolContext, tool: str, named: str, change: Change) -> WriteFileResult:
    """Write the file ``named`` (as the model gave it) with what ``change`` makes of
    its current bytes, read and replaced in one walk (so nothing written meanwhile is
    lost), through the session's store; a write outside the writable roots is put to
    the user, naming ``tool``, when someone can answer."""
    store = store_for(ctx)
    path = ctx.resolve(named)
    try:
        return await asyncio.to_thread(_write_sync, tool, ctx, store, path, named, change, None)
    except OutsideRoots as refusal:
        from codemode.tools.write_approval import approve_outside_write

        grant = await approve_outside_write(ctx, tool, path, refusal)
    return await asyncio.to_thread(_write_sync, tool, ctx, store, path, named, change, grant)


WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create a file or replace its entire contents. Parent directories are created as "
        "needed; an existing file keeps its permissions and its encoding. Only paths "
        "inside the workspace can be written (never inside .git or .codemode)."
    ),
    args_model=WriteFileArgs,
    result_model=WriteFileResult,
    handler=write_file,
    effects=frozenset({"write"}),
    dry_run=True,
    acp_kind="edit",
    hook_names=("Write",),
    render=rendering.write_file,
    core=True,
)


# --- list_dir --------------------------------------------------------------------------

EntryType = EntryKind


class ListDirArgs(StrictArgs):
    path: str = Field(
        default=".", description="Directory to list, relative to the workspace or absolute."
    )
    depth: int = Field(
        default=1,
        ge=1,
        le=5,
        description="How many levels to descend: 1 lists only the directory's own entries.",
    )
    include_hidden: bool = Field(
        default=False,
        description="Also list entries whose names start with a dot (.git is never listed).",
    )


class DirEntry(ToolResult):
    path: str = Field(description="Path relative to the listed directory, with / separators.")
    type: EntryType = Field(description="What the entry is; symlinks are not followed.")
    size: int | None = Field(description="Size in bytes for files; null for anything else.")


class ListDirResult(ToolResult):
    entries: list[DirEntry] = Field(description="The entries found, sorted by path.")
    truncated: bool = Field(
        description=f"True when listing stopped at {MAX_LIST_ENTRIES} entries; "
        "list a subdirectory or lower the depth to see the rest."
    )


def _list_dir_sync(args: ListDirArgs, ctx: ToolContext, store: FileStore) -> ListDirResult:
    root = ctx.resolve(args.path)
    info = store.stat(root)
    if info is None:
        raise ToolError(f"list_dir: no such directory: {ctx.display(root)}")
    if info.kind != "dir":
        raise ToolError(f"list_dir: {ctx.display(root)} is not a directory; use tools.read_file")
    entries: list[DirEntry] = []

    def visit(directory: Path, prefix: str, level: int) -> bool:
        """Add the entries under ``directory``; False once the cap is reached."""
        try:
            found = sorted(store.entries(directory), key=lambda e: e.name)
        except OSError:
            return True  # an unreadable subdirectory should not sink the whole listing
        for e in found:
            if e.name == ".git" or (not args.include_hidden and e.name.startswith(".")):
                continue
            if len(entries) >= MAX_LIST_ENTRIES:
                return False
            entries.append(DirEntry(path=prefix + e.name, type=e.kind, size=e.size))
            if e.kind == "dir" and level < args.depth:
                if not visit(directory / e.name, f"{prefix}{e.name}/", level + 1):
                    return False
        return True

    complete = visit(root, "", 1)
    entries.sort(key=lambda e: e.path)
    return ListDirResult(entries=entries, truncated=not complete)


async def list_dir(args: ListDirArgs, ctx: ToolContext) -> ListDirResult:
    """List a directory, optionally a few levels deep (as the session's store has it: a
    dry run's new files included)."""
    return await asyncio.to_thread(_list_dir_sync, args, ctx, store_for(ctx))


LIST_DIR = Tool(
    name="list_dir",
    description=(
        "List the files and subdirectories of a directory, optionally several levels deep. "
        "Hidden entries are left out unless include_hidden is set."
    ),
    args_model=ListDirArgs,
    result_model=ListDirResult,
    handler=list_dir,
    effects=frozenset({"read"}),
    acp_kind="search",
    hook_names=("LS",),
    render=rendering.list_dir,
    core=True,
)
