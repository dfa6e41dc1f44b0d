"""``grep``: find lines by regular expression (RE2, so no pattern can stall a search).

Like ``glob`` it skips ``.git`` and whatever ``.gitignore`` excludes, runs in a worker
thread, and searches the disk as the session's file store has it
(``codemode.tools.overlaid_walk``): in a dry run, a file written earlier in the run is
searched with its new contents and a removed one is not. Its walk reads and holds a
bounded number of entries (``codemode.tools.walk_bounds``); ``note`` names the folder a
bound kept it from searching whole. It reads at most ``MAX_GREP_BYTES`` of files in all:
a command makes a folder of 50,000 hard links to one file of 20 MB in a second, and each
one read cost ~50 ms.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.context import store_for
from codemode.tools.fs.reading import kind_of, read_resolved
from codemode.tools.fs.text import BINARY_SNIFF_CHARS, MARKED, decode, is_binary
from codemode.tools.glob_pattern import compile_glob, pattern_depth
from codemode.tools.ignore import FileWalk, walk_files
from codemode.tools.overlaid_walk import Overlay, holds, resolved_below, shown_below, walked
from codemode.tools.store import MAX_READ_BYTES
from codemode.tools.walk_bounds import shown_path

MAX_LINE_CHARS = 500
# The most lines one grep returns, whatever max_results asks: with each line cut to
# MAX_LINE_CHARS, a result stays a few megabytes (a pattern such as "^" over a file of
# millions of empty lines would otherwise build millions of matches).
MAX_GREP_MATCHES = 10_000
# The most bytes of files one grep reads, all files together: ~2 s of reading, decoding
# and matching here, past the size of the source of the largest real projects searched
# (the Linux kernel's is ~1.2 GB, most of it in files .gitignore does not cover).
MAX_GREP_BYTES = 1 << 30
# The most names ``latin1_files`` lists (a tree of a million such files would list them
# all, each up to 4,096 bytes long); ``note`` says how many there were.
MAX_LATIN1_LISTED = 100
# UTF-8 is checked this many bytes at a time: decoding a file of 20 MB whole made a
# string of 80 MB when one character was past U+FFFF.
_CHECK_CHUNK = 1 << 20


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
        description=f"True when the result is incomplete: max_results (or the cap of "
        f"{MAX_GREP_MATCHES}) was reached and further matches were left out, part of "
        "the tree was not searched (a folder of more entries than a search reads, paths "
        "longer than the system takes, more bytes of files than a search reads), a "
        ".gitignore was too costly to honour, or latin1_files is cut; note says which."
    )
    note: str | None = Field(
        default=None,
        description="Why the result is incomplete, naming the folder not searched whole; "
        "null when it is whole.",
    )
    files_searched: int = Field(description="How many text files were read.")
    latin1_files: list[str] = Field(
        default_factory=list,
        description="Searched files that are not valid UTF-8: they were read as Latin-1 "
        f"(one character per byte), as read_file reads them. At most {MAX_LATIN1_LISTED}: "
        "note says how many there were beyond.",
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


def _read_text(
    path: str, overlay: Overlay, key: Path | None = None
) -> tuple[int, tuple[bytes, bool] | None]:
    """How many bytes were read, and the file's text as UTF-8 bytes and whether it was
    Latin-1, or None for files grep passes over (binary, huge, unreadable, not regular,
    removed in the store). ``key``: the path resolved, when the caller knows it
    (``resolved_below``)."""
    if key is None and overlay:
        key = Path(path).resolve()
    if key is not None and key in overlay:
        held = overlay[key]
        if held is None or len(held) > MAX_READ_BYTES:
            return 0, None
        data = held
    else:
        try:
            data = read_resolved(path, MAX_READ_BYTES)
        except (OSError, ToolError):
            return 0, None
    return len(data), _text(data)


def _text(data: bytes) -> tuple[bytes, bool] | None:
    if not data.startswith(tuple(MARKED.values())):
        # ``decode``'s answer, without a string of the whole file: valid UTF-8 is
        # searched as it is, anything else is Latin-1.
        utf8 = _is_utf8(data)
        head = data[: 4 * BINARY_SNIFF_CHARS].decode("utf-8" if utf8 else "latin-1", "ignore")
        if is_binary(head):
            return None
        return (data, False) if utf8 else (data.decode("latin-1").encode("utf-8"), True)
    text, encoding = decode(data)
    if is_binary(text):
        return None
    if encoding == "utf-8":
        return data, False
    # Searched as text whatever its encoding; only Latin-1 is reported (it may be a
    # guess), as a file with a byte order mark says what it is.
    return text.encode("utf-8"), encoding == "latin-1"


def _is_utf8(data: bytes) -> bool:
    check = codecs.getincrementaldecoder("utf-8")()
    try:
        for at in range(0, len(data), _CHECK_CHUNK):
            check.decode(data[at : at + _CHECK_CHUNK])
        check.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


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


def _matching_lines(data: bytes, regex: Any, stop: threading.Event) -> Iterator[tuple[int, str]]:
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
            if not holds(overlay, target):
                raise ToolError(missing) from None
            st_mode = stat.S_IFDIR  # a directory only the store has (made in a dry run)
    walk: FileWalk | None = None  # the disk's walk, when a directory is searched
    if stat.S_ISDIR(st_mode):
        only = None
        depth = None
        if args.glob:
            # Like ripgrep's -g: a bare "*.py" means any .py file, not just top-level ones.
            wanted_glob = args.glob if "/" in args.glob else "**/" + args.glob
            only = compile_glob(wanted_glob)
            depth = pattern_depth(wanted_glob)
        if target.is_dir():
            walk = walk_files(target, ignore_top=ctx.workspace, stop=stop.is_set, max_depth=depth)
        rels = walked(target, walk if walk is not None else iter(()), overlay)
        # Timed with the walk's matching (a costly glob ends the walk, said in its note).
        match = walk.matches if walk is not None else (lambda rx, r: rx.fullmatch(r))
        wanted = (r for r in rels if only is None or match(only, r))
        # Each file's path and name as strings made from the folder's: parsing them anew
        # costs the file's depth, which over a tree thousands of folders deep adds up.
        base, shown_base = str(target), ctx.display(target)
        real = target.resolve() if overlay else target
        files: Iterator[tuple[str, str, Path | None]] = (
            (
                os.path.join(base, r),
                shown_below(shown_base, r),
                resolved_below(real, base, r) if overlay else None,
            )
            for r in wanted
        )
    elif stat.S_ISREG(st_mode):
        # Naming a file is explicit: search it even if .gitignore covers it.
        files = iter([(str(target), ctx.display(target), None)])
    else:
        raise ToolError(
            f"grep: {ctx.display(target)} is {kind_of(st_mode)}, not a regular file or a directory"
        )

    result = GrepResult(matches=[], truncated=False, files_searched=0)
    most = min(args.max_results, MAX_GREP_MATCHES)
    latin1 = [0]  # files read as Latin-1, listed or not
    try:
        _search(files, regex, overlay, stop, most, result, latin1)
    except _Full:
        result.note = f"more matches left out past {most:,} lines: narrow the pattern"
        if most < MAX_GREP_MATCHES:
            result.note += " or raise max_results"
    shown = ctx.display(target)
    notes = [result.note, *_latin1_note(result, latin1[0])]
    if walk is not None:
        notes += [walk.cuts.note(shown), walk.cuts.rules_note(shown)]
    result.note = "; ".join(n for n in notes if n) or None
    result.truncated = result.note is not None
    return result


class _Full(Exception):
    """As many matching lines were found as the result takes."""


def _latin1_note(result: GrepResult, latin1: int) -> list[str]:
    if latin1 <= len(result.latin1_files):
        return []
    listed = len(result.latin1_files)
    return [f"latin1_files lists {listed} of the {latin1:,} files read as Latin-1"]


def _search(
    files: Iterator[tuple[str, str, Path | None]],
    regex: Any,
    overlay: Overlay,
    stop: threading.Event,
    most: int,
    result: GrepResult,
    latin1: list[int],
) -> None:
    """Add to ``result`` the matching lines of ``files`` (``latin1[0]``: how many were
    Latin-1); raises _Full past ``most``."""
    total = 0
    for path, shown, file_key in files:
        if stop.is_set():
            break
        if total >= MAX_GREP_BYTES:
            result.note = (
                f"not all files were searched: {shown_path(shown)} and the files after it were not "
                f"read (a search reads at most {MAX_GREP_BYTES >> 20:,} MB of files): "
                "narrow the path or glob"
            )
            return
        size, read = _read_text(path, overlay, file_key)
        total += size
        if read is None:
            continue
        data, was_latin1 = read
        result.files_searched += 1
        if was_latin1:
            latin1[0] += 1  # counted past the names kept: the note says how many
            if len(result.latin1_files) < MAX_LATIN1_LISTED:
                result.latin1_files.append(shown)
        for number, line in _matching_lines(data, regex, stop):
            if len(result.matches) >= most:
                raise _Full
            result.matches.append(GrepMatch(path=shown, line=number, text=line[:MAX_LINE_CHARS]))



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
    render=rendering.with_note(rendering.grep),
    core=True,
)
