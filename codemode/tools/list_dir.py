"""``list_dir``: a directory's entries as the session's file store has them
(``codemode.tools.context.store_for``), symlinks not followed.

The listing runs in codemode's own process over folders a command may have filled: it
reads at most ``MAX_SCANNED_ENTRIES`` directory entries in all (a folder of millions
costs that much, not its size) and returns at most ``MAX_LIST_ENTRIES``; ``note`` says
which limit cut it.
"""

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
# The most directory entries one listing reads, all its folders together: ten times
# what it lists leaves room for hidden entries and the tail of the last folder, so a
# listing cut by it is one of a folder flooded with entries.
MAX_SCANNED_ENTRIES = 20_000


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
        description=f"True when the listing is incomplete: it stopped at {MAX_LIST_ENTRIES} "
        f"entries, or the folders held more than {MAX_SCANNED_ENTRIES} entries in all "
        "(only that many are read); note says which. List a subdirectory or lower the "
        "depth to see the rest."
    )
    note: str | None = Field(
        default=None, description="Why the listing is incomplete; null when it is whole."
    )


def _list_dir_sync(args: ListDirArgs, ctx: ToolContext, store: FileStore) -> ListDirResult:
    root = ctx.resolve(args.path)
    info = store.stat(root)
    if info is None:
        raise ToolError(f"list_dir: no such directory: {ctx.display(root)}")
    if info.kind != "dir":
        raise ToolError(f"list_dir: {ctx.display(root)} is not a directory; use tools.read_file")
    entries: list[DirEntry] = []
    left = MAX_SCANNED_ENTRIES  # directory entries still to be read
    crowded: list[Path] = []  # the folder read only in part

    def visit(directory: Path, prefix: str, level: int) -> bool:
        """Add the entries under ``directory``; False once the cap is reached."""
        nonlocal left
        try:
            # One more than may be read: that one says the folder holds more.
            found = store.entries(directory, limit=left + 1)
        except OSError:
            return True  # an unreadable subdirectory should not sink the whole listing
        if len(found) > left:
            del found[left:]
            crowded.append(directory)
        left -= len(found)
        found.sort(key=lambda e: e.name)
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
    notes = [] if complete else [f"stopped at {MAX_LIST_ENTRIES} entries"]
    if crowded:
        notes.append(
            f"the folders listed hold more than {MAX_SCANNED_ENTRIES} entries in all and "
            f"only that many were read: {ctx.display(crowded[0])} was read in part, so "
            "what is listed of it is not its first entries by name"
        )
    return ListDirResult(
        entries=entries, truncated=bool(notes), note="; ".join(notes) if notes else None
    )


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
