"""What a sed script can do besides printing: ``e`` commands and ``s///e`` run commands,
``w``/``W`` and ``s///w`` write files, ``r``/``R`` read files.

``analyze`` reads a script the way GNU sed splits it into commands. A script it cannot
read fully is not safe; the commands and files it found are still reported, so that a
forbidden command inside stays forbidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ADDRESS = re.compile(
    r"\s*(?:\d+(?:~\d+)?|\$|/(?:[^\\/\n]|\\.)*/[IM]*|\\(.)(?:(?!\1)[^\\\n]|\\.)*\1[IM]*)"
)
_ADDRESS2 = re.compile(r"\s*,\s*(?:[+~]\d+|\d+|\$|/(?:[^\\/\n]|\\.)*/[IM]*)")
_SIMPLE = set("=dDgGhHlnNpPxzF")
_NUMBERED = set("qQlL")
_LABELLED = set("bTt:")
_E_FALLBACK = re.compile(r"(?:^|[;\n{}])\s*[0-9$,/!\s]*e\s+([^\n;]+)")


@dataclass
class SedScript:
    safe: bool = True
    reason: str | None = None
    runs: bool = False  # something besides writing files: e, or text that could not be read
    commands: list[str] = field(default_factory=list)  # what e / s///e would run
    writes: list[str] = field(default_factory=list)  # files w / s///w would write
    reads: list[str] = field(default_factory=list)  # files r / R would read

    def fail(self, reason: str, *, writes: bool = False) -> None:
        if self.safe:
            self.safe, self.reason = False, reason
        self.runs = self.runs or not writes


def _delimited(script: str, pos: int, delim: str) -> tuple[str, int] | None:
    out = []
    while pos < len(script):
        c = script[pos]
        if c == "\\" and pos + 1 < len(script):
            out.append(script[pos : pos + 2])
            pos += 2
            continue
        if c == delim:
            return "".join(out), pos + 1
        if c == "\n":
            return None
        out.append(c)
        pos += 1
    return None


def _rest_of_line(script: str, pos: int) -> tuple[str, int]:
    end = script.find("\n", pos)
    end = len(script) if end < 0 else end
    return script[pos:end].strip(), end


def analyze(script: str) -> SedScript:
    """The commands run and files written by the sed script ``script``."""
    out = SedScript()
    pos, n = 0, len(script)
    while pos < n:
        c = script[pos]
        if c in " \t\n;":
            pos += 1
            continue
        if c == "#":
            pos = _rest_of_line(script, pos)[1]
            continue
        m = _ADDRESS.match(script, pos)
        if m:
            pos = m.end()
            m2 = _ADDRESS2.match(script, pos)
            if m2:
                pos = m2.end()
        while pos < n and script[pos] in " \t!":
            pos += 1
        if pos >= n:
            out.fail("a sed address without a command")
            break
        c = script[pos]
        pos += 1
        if c in "{}":
            continue
        if c in _SIMPLE or c in _NUMBERED:
            if c in _NUMBERED:
                while pos < n and (script[pos].isdigit() or script[pos] in " \t"):
                    pos += 1
        elif c in _LABELLED:
            while pos < n and script[pos] not in ";\n":
                pos += 1
        elif c in "aic":
            text, pos = _rest_of_line(script, pos)
            while text.endswith("\\") and pos < n:  # a\ text continued on the next line
                text, pos = _rest_of_line(script, pos + 1)
        elif c in "rR":
            name, pos = _rest_of_line(script, pos)
            out.reads.append(name)
        elif c in "wW":
            name, pos = _rest_of_line(script, pos)
            out.writes.append(name)
            out.fail(f"the sed command {c} writes the file {name!r}", writes=True)
        elif c == "e":
            command, pos = _rest_of_line(script, pos)
            out.fail("the sed command e runs a command")
            out.commands.append(command)
        elif c in "sy":
            if pos >= n or script[pos] in "\\\n":
                out.fail(f"cannot read the sed command {c}")
                break
            delim = script[pos]
            first = _delimited(script, pos + 1, delim)
            second = _delimited(script, first[1], delim) if first else None
            if second is None:
                out.fail(f"cannot read the sed command {c}")
                break
            replacement, pos = second
            if c == "s":
                m = re.compile(r"[gpiImMe0-9]*").match(script, pos)
                flags = m.group() if m else ""
                pos += len(flags)
                if "e" in flags:
                    out.fail("the sed flag s///e runs the result as a command")
                    out.commands.append(replacement.replace("\\" + delim, delim))
                if pos < n and script[pos] == "w":
                    name, pos = _rest_of_line(script, pos + 1)
                    out.writes.append(name)
                    out.fail(f"the sed flag s///w writes the file {name!r}", writes=True)
        elif c == "v":
            while pos < n and script[pos] not in ";\n":
                pos += 1
        else:
            out.fail(f"unknown sed command {c!r}")
            break
        while pos < n and script[pos] in " \t":
            pos += 1
        if pos < n and script[pos] not in ";\n}#":
            out.fail(f"unexpected text after a sed command: {script[pos : pos + 20]!r}")
            break
    if not out.safe and not out.commands:
        out.commands += [m.group(1).strip() for m in _E_FALLBACK.finditer(script)]
    return out
