"""Search tools: ``glob`` finds files by name, ``grep`` finds lines by regex.

Both skip ``.git`` and whatever ``.gitignore`` excludes, so a search of a project does
not drown in ``node_modules`` or build output. The tree walk and file reads are blocking,
so each search runs in a worker thread. They search the disk as the session's file
store has it (``FileStore.overlaid``): in a dry run, a file written earlier in the run
is found with its new contents and a removed one is not.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import kind_of, read_regular
from codemode.tools.fs.text import decode, is_binary
from codemode.tools.ignore import walk_files
from codemode.tools.store import MAX_READ_BYTES

MAX_GLOB_MATCHES = 5000
MAX_LINE_CHARS = 500
# The most lines one grep returns, whatever max_results asks: with each line cut to
# MAX_LINE_CHARS, a result stays a few megabytes (a pattern such as "^" over a file of
# millions of empty lines would otherwise build millions of matches).
MAX_GREP_MATCHES = 10_000
_MAGIC = frozenset("*?[{")


def compile_glob(pattern: str) -> Any:
    """Compile a glob to a regex to be ``fullmatch``-ed against a posix relative path.

    ``*`` and ``?`` stay within one path segment, ``[abc]``/``[!abc]`` are character
    classes, ``{a,b}`` picks one of a few alternatives, and a ``**`` segment spans zero
    or more directories, so ``**/*.py`` also matches ``setup.py`` at the top. The regex
    is RE2's: with Python's, ``*a*a*a*a*a*a*a*a*c`` took minutes on a 40-character name.
    Raises ToolError for a glob that does not compile.
    """
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    parts = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_translate_segment(seg) + ("" if last else "/"))
    import re2  # lazy: RE2 loads with the first search

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile("".join(parts), options)
    except re2.error:
        raise ToolError(f"invalid glob {pattern!r}") from None


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


def _depth(pattern: str) -> int | None:
    """How many components deep a path matching ``pattern`` is, None when ``**`` makes
    it any depth (``*`` and the other wildcards never cross a ``/``)."""
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    return None if "**" in segments else len(segments)


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


Overlay = Mapping[Path, bytes | None]


def _holds(overlay: Overlay, directory: Path) -> bool:
    """Whether the store holds a file below ``directory`` (one a dry run created)."""
    root = directory.resolve()
    return any(d is not None and k.is_relative_to(root) and k != root for k, d in overlay.items())


def _walked(start: Path, rels: Iterator[str], overlay: Overlay) -> Iterator[str]:
    """The disk walk's relative paths below ``start``, less the files the store removed,
    then the files it holds that the disk does not have (created in a dry run)."""
    if not overlay:
        yield from rels
        return
    seen: set[Path] = set()
    for rel in rels:
        path = _join(start, rel)
        key = path.resolve()
        if key in overlay and overlay[key] is None:
            continue
        seen.add(key)
        yield rel
    root = start.resolve()
    for key, data in sorted(overlay.items()):
        if data is not None and key not in seen and key.is_relative_to(root) and key != root:
            yield key.relative_to(root).as_posix()


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
    prefix, rest = _split_literal_prefix(args.pattern)
    start = _join(base, prefix)
    if not rest or not (start.is_dir() or _holds(overlay, start)):
        return GlobResult(matches=[], truncated=False)
    regex = compile_glob(rest)
    found: list[str] = []
    truncated = False
    walk = _walked(
        start,
        walk_files(
            start,
            respect_gitignore=not args.include_ignored,
            ignore_top=ctx.workspace,
            stop=stop.is_set,
            max_depth=_depth(rest),
        )
        if start.is_dir()
        else iter(()),
        overlay,
    )
    # Only regular files (and links to them) are walked: devices, FIFOs and sockets never
    # match.
    for rel in walk:
        if regex.fullmatch(rel):
            if len(found) >= MAX_GLOB_MATCHES:
                truncated = True
                break
            found.append(ctx.display(_join(start, rel)))
    return GlobResult(matches=sorted(found), truncated=truncated)


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
    render=rendering.glob,
    core=True,
)


# --- grep ------------------------------------------------------------------------------


class GrepArgs(StrictArgs):
    pattern: str = Field(
        description="Regular expression in RE2 syntax (Python's re without backreferences "
        "or lookaround), matched against each line separately."
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
    max_results: int = Field(
        default=500,
        ge=1,
        description=f"Stop after this many matching lines (at most {MAX_GREP_MATCHES}: a "
        "larger value is taken as that).",
    )


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
        description=f"True when max_results (or the cap of {MAX_GREP_MATCHES}) was reached "
        "and further matches were left out."
    )
    files_searched: int = Field(description="How many text files were read.")
    latin1_files: list[str] = Field(
        default_factory=list,
        description="Searched files that are not valid UTF-8: they were read as Latin-1 "
        "(one character per byte), as read_file reads them.",
    )


def compile_pattern(pattern: str, case_insensitive: bool) -> Any:
    """``pattern`` compiled with RE2, which matches in time linear in the text: no
    pattern (``^(a+)+$`` and the like) can stall a search. Raises ToolError."""
    return _compile_re2(pattern, case_insensitive, multiline=False)


def compile_multiline(pattern: str, case_insensitive: bool) -> Any:
    """Like ``compile_pattern``, but a match may span lines and ``.`` matches a newline
    (Claude Code's ``multiline`` grep). Match it against UTF-8 bytes."""
    return _compile_re2(pattern, case_insensitive, multiline=True)


def _compile_re2(pattern: str, case_insensitive: bool, *, multiline: bool) -> Any:
    import re2  # lazy: RE2 loads with the first search

    options = re2.Options()
    # Unless asked to span lines, a match never does, as grep's never does.
    options.never_nl = not multiline
    options.dot_nl = multiline
    options.log_errors = False
    options.case_sensitive = not case_insensitive
    try:
        return re2.compile("(?m)" + pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "backslashreplace")
        raise ToolError(
            f"grep: invalid regular expression {pattern!r}: {reason} (grep takes RE2 "
            "syntax: no backreferences or lookaround)"
        ) from None


def _read_text(path: Path, overlay: Overlay) -> tuple[bytes, bool] | None:
    """A file's text as UTF-8 bytes and whether it was Latin-1, or None for files grep
    passes over (binary, huge, unreadable, not regular, removed in the store)."""
    key = path.resolve() if overlay else path
    if key in overlay:
        held = overlay[key]
        if held is None or len(held) > MAX_READ_BYTES:
            return None
        data = held
    else:
        try:
            data = read_regular(path, MAX_READ_BYTES)
        except (OSError, ToolError):
            return None
    text, encoding = decode(data)
    if is_binary(text):
        return None
    if encoding == "utf-8":
        return data, False
    # Searched as text whatever its encoding; only Latin-1 is reported (it may be a
    # guess), as a file with a byte order mark says what it is.
    return text.encode("utf-8"), encoding == "latin-1"


def matching_line_spans(
    data: bytes, regex: Any, stop: threading.Event
) -> Iterator[tuple[int, int, int]]:
    """(line number, start, end) in ``data`` of each line where ``regex`` finds a match,
    ``end`` before the newline. After a match the search goes on at the next line, so a
    pattern matching everywhere (``x*``) costs one search per line, not one per byte."""
    size = len(data)
    pos = 0
    number, counted_to = 1, 0
    while pos <= size and not stop.is_set():
        m = regex.search(data, pos)
        if m is None:
            return
        at = m.start()
        if at >= size and (size == 0 or data.endswith(b"\n")):
            return  # the empty "line" after a final newline is not a line
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = size if end == -1 else end
        number += data.count(b"\n", counted_to, start)
        counted_to = start
        yield number, start, end
        pos = end + 1


def _matching_lines(
    data: bytes, regex: Any, stop: threading.Event
) -> Iterator[tuple[int, str]]:
    """(line number, line text) of each line of ``data`` that ``regex`` matches."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")  # "$" then matches before a CRLF ending too
    for number, start, end in matching_line_spans(data, regex, stop):
        yield number, data[start:end].rstrip(b"\r").decode("utf-8")


def _grep_sync(
    args: GrepArgs, regex: Any, ctx: ToolContext, stop: threading.Event, overlay: Overlay
) -> GrepResult:
    target = ctx.resolve(args.path)
    missing = f"grep: no such file or directory: {ctx.display(target)}"
    key = target.resolve() if overlay else target
    if key in overlay:  # a file the store holds over the disk's
        if overlay[key] is None:
            raise ToolError(missing)
        st_mode = stat.S_IFREG
    else:
        try:
            st_mode = target.stat().st_mode
        except OSError:
            if not _holds(overlay, target):
                raise ToolError(missing) from None
            st_mode = stat.S_IFDIR  # a directory only the store has (made in a dry run)
    if stat.S_ISDIR(st_mode):
        only = None
        depth = None
        if args.glob:
            # Like ripgrep's -g: a bare "*.py" means any .py file, not just top-level ones.
            wanted_glob = args.glob if "/" in args.glob else "**/" + args.glob
            only = compile_glob(wanted_glob)
            depth = _depth(wanted_glob)
        on_disk = target.is_dir()
        rels = _walked(
            target,
            walk_files(target, ignore_top=ctx.workspace, stop=stop.is_set, max_depth=depth)
            if on_disk
            else iter(()),
            overlay,
        )
        wanted = (r for r in rels if only is None or only.fullmatch(r))
        files: Iterator[Path] = (_join(target, r) for r in wanted)
    elif stat.S_ISREG(st_mode):
        # Naming a file is explicit: search it even if .gitignore covers it.
        files = iter([target])
    else:
        raise ToolError(
            f"grep: {ctx.display(target)} is {kind_of(st_mode)}, not a regular file or "
            "a directory"
        )

    result = GrepResult(matches=[], truncated=False, files_searched=0)
    most = min(args.max_results, MAX_GREP_MATCHES)
    for path in files:
        if stop.is_set():
            break
        read = _read_text(path, overlay)
        if read is None:
            continue
        data, latin1 = read
        result.files_searched += 1
        shown = ctx.display(path)
        if latin1:
            result.latin1_files.append(shown)
        for number, line in _matching_lines(data, regex, stop):
            if len(result.matches) >= most:
                result.truncated = True
                return result
            result.matches.append(GrepMatch(path=shown, line=number, text=line[:MAX_LINE_CHARS]))
    return result


async def grep(args: GrepArgs, ctx: ToolContext) -> GrepResult:
    """Search file contents for lines matching a regular expression."""
    regex = compile_pattern(args.pattern, args.case_insensitive)
    stop = threading.Event()
    overlay = store_for(ctx).overlaid()  # on the event loop, as store_for wants
    try:
        return await asyncio.to_thread(_grep_sync, args, regex, ctx, stop, overlay)
    finally:
        # A cancelled await (the program's time limit, an interrupt) leaves the thread
        # running; this makes it stop at the next match or file.
        stop.set()


GREP = Tool(
    name="grep",
    description=(
        "Search text files for lines matching a regular expression in RE2 syntax (like "
        "Python's or JavaScript's, without backreferences or lookaround; matching takes "
        "linear time). Files ignored by .gitignore, binary files, files over 20 MB and "
        "anything but regular files are skipped; files that are not UTF-8 are searched "
        "as Latin-1."
    ),
    args_model=GrepArgs,
    result_model=GrepResult,
    handler=grep,
    effects=frozenset({"read"}),
    acp_kind="search",
    hook_names=("Grep",),
    render=rendering.grep,
    core=True,
)
