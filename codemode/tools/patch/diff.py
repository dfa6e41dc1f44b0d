"""The unified diff of what a patch did, built from the edits themselves.

No diff algorithm runs: the chunks already say which lines were removed and added, so
the diff costs time in proportion to the change, not to the file.
"""

from __future__ import annotations

from codemode.tools.patch.edit import Edit

CONTEXT = 3
_NO_NEWLINE = "\\ No newline at end of file\n"


def added_file_diff(path: str, lines: list[str]) -> str:
    return _header("/dev/null", f"b/{path}") + _whole(lines, "+", "-0,0", "+1")


def deleted_file_diff(path: str, lines: list[str]) -> str:
    if any("\0" in line for line in lines[:200]):
        return f"Binary files a/{path} and /dev/null differ\n"
    return _header(f"a/{path}", "/dev/null") + _whole(lines, "-", "-1", "+0,0")


def update_diff(old_path: str, new_path: str, old_lines: list[str], edits: list[Edit]) -> str:
    """The diff for an updated (and maybe moved) file; ``edits`` sorted, not overlapping."""
    out = [_header(f"a/{old_path}", f"b/{new_path}")]
    delta = 0  # new line number minus old line number, before the current group
    for group in _groups(edits):
        first, last = group[0], group[-1]
        start = max(first.start - CONTEXT, 0)
        stop = min(last.start + len(last.old) + CONTEXT, len(old_lines))
        body: list[str] = []
        old_count = new_count = 0
        cursor = start
        for e in group:
            for line in old_lines[cursor : e.start]:
                body.append(_line(" ", line))
            old_count += e.start - cursor
            new_count += e.start - cursor
            body.extend(_line("-", line) for line in e.old)
            body.extend(_line("+", line) for line in e.new)
            old_count += len(e.old)
            new_count += len(e.new)
            cursor = e.start + len(e.old)
        for line in old_lines[cursor:stop]:
            body.append(_line(" ", line))
        old_count += stop - cursor
        new_count += stop - cursor
        new_start = start + delta
        out.append(f"@@ {_range('-', start, old_count)} {_range('+', new_start, new_count)} @@\n")
        out.extend(body)
        delta += sum(len(e.new) - len(e.old) for e in group)
    return "".join(out)


def _groups(edits: list[Edit]) -> list[list[Edit]]:
    """Edits close enough that their context would touch share one hunk."""
    groups: list[list[Edit]] = []
    for e in edits:
        if groups:
            prev = groups[-1][-1]
            if e.start - (prev.start + len(prev.old)) <= 2 * CONTEXT:
                groups[-1].append(e)
                continue
        groups.append([e])
    return groups


def _header(old: str, new: str) -> str:
    return f"--- {old}\n+++ {new}\n"


def _whole(lines: list[str], sign: str, old_range: str, new_range: str) -> str:
    if not lines:
        return ""
    n = len(lines)
    count = "" if n == 1 else f",{n}"
    ranges = f"{old_range}{count} {new_range}" if sign == "-" else f"{old_range} {new_range}{count}"
    return f"@@ {ranges} @@\n" + "".join(_line(sign, line) for line in lines)


def _range(sign: str, start: int, count: int) -> str:
    # GNU diff: "l,n"; ",1" omitted; an empty range names the line before it.
    if count == 0:
        return f"{sign}{start},0"
    return f"{sign}{start + 1}" if count == 1 else f"{sign}{start + 1},{count}"


def _line(sign: str, line: str) -> str:
    if line.endswith("\r\n"):
        return f"{sign}{line[:-2]}\n"
    if line.endswith(("\n", "\r")):  # a lone CR ends a line too (edit.split_lines)
        return f"{sign}{line[:-1]}\n"
    return f"{sign}{line}\n{_NO_NEWLINE}"
