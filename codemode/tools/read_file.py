"""``read_file``: a file's text, or a window of its lines, through the session's file store
(``codemode.tools.context.store_for``: the disk, a dry run's overlay, or the editor's
buffers). Reads may look anywhere (the model often needs a system header or a sibling
project) but take regular files only, up to a byte cap. Contents are decoded without
losing a byte (``codemode.tools.fs.text``); the blocking work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import NotRegular, TooBig
from codemode.tools.fs.text import (
    Encoding,
    decode,
    is_binary,
)
from codemode.tools.store import (
    MAX_READ_BYTES,
    FileStore,
)


def looks_binary(data: bytes) -> bool:
    """Whether a file holding ``data`` is binary: a NUL near the start of its text (so a
    UTF-16 file, whose bytes are half NULs, is text)."""
    return is_binary(decode(data)[0])


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
