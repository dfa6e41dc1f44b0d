"""``write_file``: replace or create a file through the session's file store
(``codemode.tools.context.store_for``). Writes are confined to the writable roots, which
the store enforces (a write outside them may be put to the user:
``codemode.tools.write_approval``); a file keeps the encoding it had
(``codemode.tools.fs.text``). The blocking work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.text import (
    Encoding,
    check_no_new_replacement,
    decode,
    encode,
    is_binary,
)
from codemode.tools.store import (
    FileStore,
    OutsideRoots,
    WriteRefused,
)


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
