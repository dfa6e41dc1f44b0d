"""``list_dir``: a directory's entries as the session's file store has them
(``codemode.tools.context.store_for``), symlinks not followed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.store import (
    EntryKind,
    FileStore,
)

MAX_LIST_ENTRIES = 2000


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
