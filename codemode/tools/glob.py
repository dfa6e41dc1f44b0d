"""``glob``: find files by path pattern.

The walk skips ``.git`` and whatever ``.gitignore`` excludes, so a search of a project
does not drown in ``node_modules`` or build output. It is blocking, so it runs in a
worker thread. It sees the disk as the session's file store has it
(``codemode.tools.overlaid_walk``): in a dry run, a file written earlier in the run is
found and a removed one is not. Its walk reads and holds a bounded number of entries
(``codemode.tools.walk_bounds``); ``note`` names the folder a bound kept it from
searching whole.
"""

from __future__ import annotations

import asyncio
import stat
import threading

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import kind_of
from codemode.tools.glob_pattern import compile_glob, pattern_depth, split_literal_prefix
from codemode.tools.ignore import walk_files
from codemode.tools.overlaid_walk import Overlay, holds, join, shown_below, walked

MAX_GLOB_MATCHES = 5000


class GlobArgs(StrictArgs):
    pattern: str = Field(
        description='Glob matched against paths below `path`, e.g. "**/*.py" (any depth, '
        'including the top), "src/*.ts" (one level), "**/test_*.{py,js}". '
        '"*" does not cross "/"; a bare "*.py" only matches files directly in `path`.'
    )
    path: str = Field(
        default=".", description="Directory to search from; the workspace if omitted."
    )
    include_ignored: bool = Field(
        default=False, description="Also match files excluded by .gitignore."
    )


class GlobResult(ToolResult):
    matches: list[str] = Field(
        description="Matching files, relative to the workspace, sorted. Directories are "
        "not included."
    )
    truncated: bool = Field(
        description=f"True when the result is incomplete: more than {MAX_GLOB_MATCHES} "
        "files matched and the rest were left out (narrow the pattern), part of the "
        "tree was not searched (a folder of more entries than a search reads, or paths "
        "longer than the system takes), or a .gitignore was too costly to honour (files "
        "it ignores may be listed); note says which."
    )
    note: str | None = Field(
        default=None,
        description="Why the result is incomplete, naming the folder not searched whole; "
        "null when it is whole.",
    )


def _glob_sync(
    args: GlobArgs, ctx: ToolContext, stop: threading.Event, overlay: Overlay
) -> GlobResult:
    base = ctx.resolve(args.path)
    try:
        mode = base.stat().st_mode
    except OSError:
        raise ToolError(f"glob: no such directory: {ctx.display(base)}") from None
    if not stat.S_ISDIR(mode):
        raise ToolError(f"glob: {ctx.display(base)} is {kind_of(mode)}, not a directory")
    prefix, rest = split_literal_prefix(args.pattern)
    start = join(base, prefix)
    if not rest or not (start.is_dir() or holds(overlay, start)):
        return GlobResult(matches=[], truncated=False)
    regex = compile_glob(rest)
    found: list[str] = []
    notes = []
    disk = (
        walk_files(
            start,
            respect_gitignore=not args.include_ignored,
            ignore_top=ctx.workspace,
            stop=stop.is_set,
            max_depth=pattern_depth(rest),
        )
        if start.is_dir()
        else None
    )
    shown = ctx.display(start)
    # Only regular files (and links to them) are walked: devices, FIFOs and sockets never
    # match.
    for rel in walked(start, disk if disk is not None else iter(()), overlay):
        # Timed with the walk's matching (a costly glob ends the walk, said in its note).
        if disk.matches(regex, rel) if disk is not None else regex.fullmatch(rel):
            if len(found) >= MAX_GLOB_MATCHES:
                notes.append(f"more than {MAX_GLOB_MATCHES:,} files matched: narrow the pattern")
                break
            found.append(shown_below(shown, rel))
    if disk is not None:
        notes += [n for n in (disk.cuts.note(shown), disk.cuts.rules_note(shown)) if n]
    note = "; ".join(notes) or None
    return GlobResult(matches=sorted(found), truncated=note is not None, note=note)



async def glob(args: GlobArgs, ctx: ToolContext) -> GlobResult:
    """Find files whose paths match a glob pattern."""
    stop = threading.Event()
    overlay = store_for(ctx).overlaid()  # on the event loop, as store_for wants
    try:
        return await asyncio.to_thread(_glob_sync, args, ctx, stop, overlay)
    finally:
        stop.set()  # a cancelled await: the walk stops at its next directory


GLOB = Tool(
    name="glob",
    description=(
        'Find regular files by path pattern, e.g. all "**/*.py" files. Files ignored by '
        ".gitignore are skipped unless include_ignored is set; .git always is."
    ),
    args_model=GlobArgs,
    result_model=GlobResult,
    handler=glob,
    effects=frozenset({"read"}),
    acp_kind="search",
    hook_names=("Glob",),
    render=rendering.with_note(rendering.glob),
    core=True,
)
