"""The ``edit`` tool: replace an exact piece of text in a file.

Many agents edit by naming the text to change rather than by patch: the emulated
harnesses (``Edit{file_path, old_string, new_string, replace_all}`` and its relatives)
all land here. The old text must match exactly once unless ``replace_all`` is set, so
an ambiguous edit is refused instead of changing the wrong place.

A file keeps its encoding (``codemode.tools.fs.text``) and its line endings: in a file
whose every line ends in CRLF, the ``\n`` line breaks of old_string and new_string are
taken as CRLF (a model copying the text back usually drops the ``\r``), so no LF-only
line is written into it. Binary files are refused, as read_file refuses them.
"""

from __future__ import annotations

import asyncio
import re

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import NotRegular
from codemode.tools.fs.text import Encoding, check_no_new_replacement, decode, encode, is_binary
from codemode.tools.store import FileStore
from codemode.tools.write_file import write_changed


class EditArgs(StrictArgs):
    path: str = Field(description="File to edit, relative to the workspace or absolute.")
    old_string: str = Field(
        description="The exact text to replace, whitespace included. Empty creates the file "
        "with new_string as its content (only when the file does not exist)."
    )
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence instead of exactly one."
    )


# A line feed that is not the end of a CRLF.
_BARE_LF = re.compile(r"(?<!\r)\n")


def _crlf_only(text: str) -> bool:
    """Whether every line break of ``text`` is CRLF (and it has at least one)."""
    return "\r\n" in text and _BARE_LF.search(text) is None


def _as_crlf(text: str) -> str:
    return _BARE_LF.sub("\r\n", text)


class EditResult(ToolResult):
    path: str = Field(description="The file edited, relative to the workspace.")
    replacements: int = Field(description="How many occurrences were replaced.")
    created: bool = Field(description="True when the edit created the file.")


def _replaced(args: EditArgs, data: bytes, shown: str) -> tuple[str, str, Encoding, int]:
    """The file holding ``data`` with the edit made: its old text, its new text, its
    encoding and how many occurrences were replaced; raises ToolError."""
    # A file that is not UTF-8 is edited as Latin-1 and written back so: no byte changes.
    text, encoding = decode(data)
    if is_binary(text):
        raise ToolError(f"{shown} looks like a binary file (it has NUL bytes); not edited")
    old_string, new_string = args.old_string, args.new_string
    if _crlf_only(text):
        old_string, new_string = _as_crlf(old_string), _as_crlf(new_string)
    count = text.count(old_string)
    if count == 0:
        hint = ""
        if text.count(old_string.strip()) > 0:
            hint = " (it matches once leading/trailing whitespace is dropped: check indentation)"
        raise ToolError(f"old_string was not found in {shown}{hint}; read the file first")
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {shown}; add surrounding lines to make "
            "it unique, or set replace_all"
        )
    new = text.replace(old_string, new_string, -1 if args.replace_all else 1)
    return text, new, encoding, count if args.replace_all else 1


def _check_edit(args: EditArgs, ctx: ToolContext, store: FileStore) -> None:
    """Refuse (ToolError) an edit that cannot be made to the file as the session's store
    has it, before a write is attempted (or an approval asked for)."""
    path = ctx.resolve(args.path)
    shown = ctx.display(path)
    if args.old_string == "":
        if store.stat(path) is not None:
            raise ToolError(
                f"edit: old_string is empty but {shown} exists; give the text to replace"
            )
        return
    try:
        data = store.read(path, shown)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"edit: {shown} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"edit: {shown} is a directory, not a regular file") from None
    except NotRegular as exc:
        raise ToolError(f"edit: {exc}") from None
    except ToolError as exc:
        raise ToolError(f"edit: {exc}") from None
    except OSError as exc:
        raise ToolError(f"edit: cannot read {shown}: {exc.strerror or exc}") from None
    if args.old_string == args.new_string:
        raise ToolError("edit: old_string and new_string are the same; nothing to change")
    try:
        _replaced(args, data, shown)
    except ToolError as exc:
        raise ToolError(f"edit: {exc}") from None


async def edit(args: EditArgs, ctx: ToolContext) -> EditResult:
    """Replace exact text in a file (once, or everywhere with replace_all).

    The file is read and written through the session's store (a dry run's overlay, an
    editor's buffers) and the write through ``write_file``'s path, so it obeys the same
    writable roots and approval. The edit is made again on what the file holds when it
    is replaced, in the same walk: text written meanwhile (by a shell, say) is kept, or
    the edit is refused if it no longer applies."""
    await asyncio.to_thread(_check_edit, args, ctx, store_for(ctx))
    replaced = 1

    def change(old: bytes | None, shown: str) -> bytes:
        nonlocal replaced
        if args.old_string == "":
            if old is not None:
                raise ToolError(f"old_string is empty but {shown} exists; give the text to replace")
            return encode(args.new_string, "utf-8", shown)
        if old is None:
            raise ToolError(f"{shown} does not exist (or is over the size limit)")
        text, new, encoding, replaced = _replaced(args, old, shown)
        check_no_new_replacement(new, text, shown)
        return encode(new, encoding, shown)

    written = await write_changed(ctx, "edit", args.path, change)
    return EditResult(path=written.path, replacements=replaced, created=written.created)


EDIT = Tool(
    name="edit",
    description=(
        "Replace an exact string in a file. old_string must occur exactly once unless "
        "replace_all is true; an empty old_string creates a new file. The file keeps its "
        "encoding (a file that is not UTF-8 is edited as Latin-1, byte for byte)."
    ),
    args_model=EditArgs,
    result_model=EditResult,
    handler=edit,
    effects=frozenset({"write"}),
    acp_kind="edit",
    hook_names=("Edit",),
    render=rendering.edit,
    core=True,
    dry_run=True,
)
