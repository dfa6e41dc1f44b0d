"""Search tools: ``glob`` finds files by name, ``grep`` finds lines by regex.

Both skip ``.git`` and whatever ``.gitignore`` excludes, so a search of a project does
not drown in ``node_modules`` or build output. The tree walk and file reads are blocking,
so each search runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path

from pydantic import Field

from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.files import MAX_READ_BYTES, looks_binary, split_lines
from codemode.tools.ignore import walk_files

MAX_GLOB_MATCHES = 5000
MAX_LINE_CHARS = 500
_MAGIC = frozenset("*?[{")


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob to a regex to be ``fullmatch``-ed against a posix relative path.

    ``*`` and ``?`` stay within one path segment, ``[abc]``/``[!abc]`` are character
    classes, ``{a,b}`` picks one of a few alternatives, and a ``**`` segment spans zero
    or more directories, so ``**/*.py`` also matches ``setup.py`` at the top.
    """
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    parts = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_translate_segment(seg) + ("" if last else "/"))
    return re.compile("".join(parts))


def _translate_segment(seg: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := _class_end(seg, i)) != -1:
            body = seg[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end
        elif c == "{" and (end := seg.find("}", i)) != -1:
            choices = seg[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_translate_segment(a) for a in choices) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(seg: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 if unclosed."""
    j = start + 1
    if seg[j : j + 1] in ("!", "^"):
        j += 1
    # A "]" first in the class is a literal member, as in shell globs.
    if seg[j : j + 1] == "]":
        j += 1
    return seg.find("]", j)


def _split_literal_prefix(pattern: str) -> tuple[str, str]:
    """Split ``src/lib/*.ts`` into ``("src/lib", "*.ts")`` so the walk can start lower."""
    segments = pattern.split("/")
    n = 0
    while n < len(segments) - 1 and segments[n] != "**" and not _MAGIC.intersection(segments[n]):
        n += 1
    prefix = "/".join(segments[:n])
    if not prefix and pattern.startswith("/"):
        prefix = "/"  # an absolute pattern such as "/*.conf" starts at the filesystem root
    return prefix, "/".join(segments[n:])


def _join(base: Path, rel: str) -> Path:
    return Path(os.path.normpath(os.path.join(base, rel)))


# --- glob ------------------------------------------------------------------------------


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
        description=f"True when more than {MAX_GLOB_MATCHES} files matched and the rest "
        "were left out; narrow the pattern."
    )


def _glob_sync(args: GlobArgs, ctx: ToolContext) -> GlobResult:
    base = ctx.resolve(args.path)
    if not base.is_dir():
        raise ToolError(f"glob: no such directory: {ctx.display(base)}")
    prefix, rest = _split_literal_prefix(args.pattern)
    start = _join(base, prefix)
    if not rest or not start.is_dir():
        return GlobResult(matches=[], truncated=False)
    regex = compile_glob(rest)
    found: list[str] = []
    truncated = False
    walk = walk_files(start, respect_gitignore=not args.include_ignored, ignore_top=ctx.workspace)
    for rel in walk:
        if regex.fullmatch(rel):
            if len(found) >= MAX_GLOB_MATCHES:
                truncated = True
                break
            found.append(ctx.display(_join(start, rel)))
    return GlobResult(matches=sorted(found), truncated=truncated)


async def glob(args: GlobArgs, ctx: ToolContext) -> GlobResult:
    """Find files whose paths match a glob pattern."""
    return await asyncio.to_thread(_glob_sync, args, ctx)


GLOB = Tool(
    name="glob",
    description=(
        'Find files by path pattern, e.g. all "**/*.py" files. Files ignored by '
        ".gitignore and anything in .git are skipped unless include_ignored is set."
    ),
    args_model=GlobArgs,
    result_model=GlobResult,
    handler=glob,
)


# --- grep ------------------------------------------------------------------------------


class GrepArgs(StrictArgs):
    pattern: str = Field(
        description="Python regular expression, matched against each line separately."
    )
    path: str = Field(
        default=".", description="File or directory to search; the workspace if omitted."
    )
    glob: str | None = Field(
        default=None,
        description="Only search files whose path below `path` matches this glob, e.g. "
        '"**/*.ts". A glob without "/" such as "*.py" matches the file name at any depth.',
    )
    case_insensitive: bool = Field(default=False, description="Ignore case when matching.")
    max_results: int = Field(default=500, ge=1, description="Stop after this many matching lines.")


class GrepMatch(ToolResult):
    path: str = Field(description="File containing the match, relative to the workspace.")
    line: int = Field(description="1-based line number.")
    text: str = Field(
        description=f"The matching line without its line ending, cut to {MAX_LINE_CHARS} "
        "characters."
    )


class GrepResult(ToolResult):
    matches: list[GrepMatch] = Field(description="Matching lines, file by file, in line order.")
    truncated: bool = Field(
        description="True when max_results was reached and further matches were left out."
    )
    files_searched: int = Field(description="How many text files were read.")


def _read_text(path: Path) -> str | None:
    """A file's text, or None for files grep should pass over (binary, huge, unreadable)."""
    try:
        if path.stat().st_size > MAX_READ_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if looks_binary(data):
        return None
    return data.decode("utf-8", errors="replace")


def _grep_sync(
    args: GrepArgs, regex: re.Pattern[str], ctx: ToolContext, stop: threading.Event
) -> GrepResult:
    target = ctx.resolve(args.path)
    if target.is_dir():
        only = None
        if args.glob:
            # Like ripgrep's -g: a bare "*.py" means any .py file, not just top-level ones.
            only = compile_glob(args.glob if "/" in args.glob else "**/" + args.glob)
        rels = walk_files(target, ignore_top=ctx.workspace, stop=stop.is_set)
        files = (_join(target, r) for r in rels if only is None or only.fullmatch(r))
    elif target.is_file():
        # Naming a file is explicit: search it even if .gitignore covers it.
        files = iter([target])
    else:
        raise ToolError(f"grep: no such file or directory: {ctx.display(target)}")

    matches: list[GrepMatch] = []
    searched = 0
    for path in files:
        if stop.is_set():
            break
        text = _read_text(path)
        if text is None:
            continue
        searched += 1
        shown = ctx.display(path)
        for number, line in enumerate(split_lines(text), start=1):
            line = line.rstrip("\r\n")
            if regex.search(line):
                if len(matches) >= args.max_results:
                    return GrepResult(matches=matches, truncated=True, files_searched=searched)
                matches.append(GrepMatch(path=shown, line=number, text=line[:MAX_LINE_CHARS]))
    return GrepResult(matches=matches, truncated=False, files_searched=searched)


async def grep(args: GrepArgs, ctx: ToolContext) -> GrepResult:
    """Search file contents for lines matching a regular expression."""
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.case_insensitive else 0)
    except re.error as exc:
        raise ToolError(f"grep: invalid regular expression {args.pattern!r}: {exc}") from None
    stop = threading.Event()
    try:
        return await asyncio.to_thread(_grep_sync, args, regex, ctx, stop)
    finally:
        # A cancelled await leaves the thread running; this tells it to wind down.
        stop.set()


GREP = Tool(
    name="grep",
    description=(
        "Search text files for lines matching a regular expression (Python syntax). "
        "Files ignored by .gitignore, binary files and files over 20 MB are skipped."
    ),
    args_model=GrepArgs,
    result_model=GrepResult,
    handler=grep,
)
