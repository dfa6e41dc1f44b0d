"""Reads of other processes' state under ``/proc``: their environment (the agent's API
keys), memory, open files, and their root and working directories, which reach past the
sandbox's mounts. Any command naming such a path (as an argument, an option's value, a
redirection, through a glob, a variable or a ``cd``) needs approval; so does a program
that may read a whole tree (``grep -r``, ``tar``) given ``/``, ``/proc`` or a process
directory. What may be read is data: ``proc_paths.toml``.

A word only partly known (``/proc/$PID/environ``, ``/proc/[0-9]*/environ``) is turned
into a regular expression (a glob's ``*`` stays within one name, an expansion may be
anything, slashes included) and tried against sample paths of each sensitive kind.
"""

from __future__ import annotations

import functools
import itertools
import os.path
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from codemode.sandbox import devices
from codemode.sandbox.script_types import SimpleCommand
from codemode.sandbox.verdicts import CommandVerdict
from codemode.sandbox.words import Word, decode_ansi_c

RULE = "built-in: reads process state under /proc"
WHY = (
    "a process's environment, memory, open files or root directory (secrets such as "
    "API keys, or files outside the sandbox)"
)
# Expansions with fewer known characters than this around them name nothing in
# particular (`cat "$f"`): only the approval policy can judge those.
_MIN_KNOWN = 4
_MAX_LINKS = 16
_EXEC_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@dataclass(frozen=True)
class _Table:
    process_entries: frozenset[str]
    own_fds: frozenset[str]
    machine_files: frozenset[str]
    tree_readers: frozenset[str]
    probes: tuple[str, ...]  # sensitive sample paths
    ancestors: tuple[str, ...]  # directories above them


@functools.cache
def _table() -> _Table:
    text = resources.files("codemode.sandbox").joinpath("proc_paths.toml").read_text("utf-8")
    d = tomllib.loads(text)
    pids = d["probe_pids"]
    probes = [f"/proc/{m}" for m in d["machine_files"]]
    ancestors = ["/", "/proc"]
    for p in pids:
        ancestors += [f"/proc/{p}", f"/proc/{p}/task", f"/proc/{p}/task/{p}"]
        for e in d["probe_entries"]:
            probes += [f"/proc/{p}/{e}", f"/proc/{p}/task/{p}/{e}"]
    return _Table(
        process_entries=frozenset(d["process_entries"]),
        own_fds=frozenset(d["own_fds"]),
        machine_files=frozenset(d["machine_files"]),
        tree_readers=frozenset(d["tree_readers"]),
        probes=tuple(probes),
        ancestors=tuple(ancestors),
    )


# --- a word as a pattern of what it may be -----------------------------------------------

# Tokens: ("c", char) a known character, ("*",) / ("?",) / ("[", class) a glob's,
# ("$",) an expansion: any text at all.
_Token = tuple[str, ...]
_DYN: _Token = ("$",)


def _glob_at(text: str, i: int) -> tuple[_Token, int]:
    """The glob token at ``text[i]`` and the index after it."""
    c = text[i]
    if c in "*?":
        return (c,), i + 1
    if c == "[":
        start = i + 2 if text[i + 1 : i + 2] in ("!", "^") else i + 1
        end = text.find("]", start + 1)
        if end != -1:
            body = text[i + 1 : end]
            return ("[", "^" + body[1:] if body[:1] in ("!", "^") else body), end + 1
    return ("c", c), i + 1


def _glob_tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(text):
        token, i = _glob_at(text, i)
        out.append(token)
    return out


def _closing(text: str, i: int, open_: str, close: str) -> int:
    """The index just past the bracket closing the one opened before ``i`` (skipping
    quoted text); the end of ``text`` when there is none."""
    depth = 1
    while i < len(text) and depth:
        c = text[i]
        if c == "\\":
            i += 1
        elif c == "'":
            i = text.find("'", i + 1) if text.find("'", i + 1) != -1 else len(text)
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
        i += 1
    return i


def _source_tokens(text: str, *, quoted: bool = False) -> list[_Token]:
    """The tokens of a word as written (a dynamic word's text)."""
    out: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        nxt = text[i + 1 : i + 2]
        if c == "\\" and nxt:
            out.append(("c", nxt))
            i += 2
        elif c == "'" and not quoted:
            end = text.find("'", i + 1)
            end = len(text) if end == -1 else end
            out += [("c", ch) for ch in text[i + 1 : end]]
            i = end + 1
        elif c == "$" and nxt == "'" and not quoted:
            end = i + 2
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            out += [("c", ch) for ch in decode_ansi_c(text[i + 2 : end])]
            i = end + 1
        elif c == '"' and not quoted:
            end = i + 1
            while end < len(text) and text[end] != '"':
                if text[end] == "\\":
                    end += 1
                elif text[end] == "$" and text[end + 1 : end + 2] in ("(", "{"):
                    opener = text[end + 1]
                    end = _closing(text, end + 2, opener, ")" if opener == "(" else "}") - 1
                elif text[end] == "`":
                    found = text.find("`", end + 1)
                    end = len(text) if found == -1 else found
                end += 1
            out += _source_tokens(text[i + 1 : end], quoted=True)
            i = end + 1
        elif c == "$" and nxt in ("(", "{"):
            i = _closing(text, i + 2, nxt, ")" if nxt == "(" else "}")
            out.append(_DYN)
        elif c == "$" and nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i + 1 :])
            i += 1 + (len(m.group()) if m else 1)
            out.append(_DYN)
        elif c == "`":
            end = text.find("`", i + 1)
            i = len(text) if end == -1 else end + 1
            out.append(_DYN)
        elif c in "<>" and nxt == "(":
            i = _closing(text, i + 2, "(", ")")
            out.append(_DYN)
        elif not quoted and c in "*?[":
            token, i = _glob_at(text, i)
            out.append(token)
        else:
            out.append(("c", c))
            i += 1
    return out


def _tokens(word: Word) -> list[list[_Token]]:
    """Each form the word may take."""
    if word.literal:
        return [[("c", c) for c in word.text]]
    if word.kind == "glob":
        return [_glob_tokens(word.text)]
    if word.braces:
        return [_glob_tokens(b) for b in word.braces]
    return [_source_tokens(word.text)]


def _path_parts(tokens: list[_Token]) -> Iterable[list[_Token]]:
    """The word, and what follows its first ``=`` (``--file=PATH``) or, for an option,
    its first ``/`` (``-f/PATH``)."""
    yield tokens
    for i, t in enumerate(tokens):
        if t == ("c", "="):
            yield tokens[i + 1 :]
            break
    if tokens[:1] == [("c", "-")]:
        for i, t in enumerate(tokens):
            if t == ("c", "/"):
                yield tokens[i:]
                break


def _known(tokens: Sequence[_Token]) -> int:
    return sum(1 for t in tokens if t[0] == "c")


def _regex(tokens: Sequence[_Token]) -> re.Pattern[str]:
    out = []
    for t in tokens:
        if t[0] == "c":
            out.append(re.escape(t[1]))
        elif t[0] == "*":
            out.append("[^/]*")
        elif t[0] == "?":
            out.append("[^/]")
        elif t[0] == "[":
            out.append("[" + t[1].replace("\\", "\\\\").replace("[", "\\[") + "]")
        else:
            out.append(".*")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error:
        return re.compile(".*", re.DOTALL)  # a class re cannot read: assume the worst


# --- what a path is ---------------------------------------------------------------------


def _literal_kind(path: str) -> str | None:
    """``"sensitive"``, ``"ancestor"`` (a directory above such paths) or None."""
    table = _table()
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not path.startswith("/"):
        return None
    if not parts:
        return "ancestor"
    if parts[0] != "proc":
        return None
    rest = parts[1:]
    if not rest:
        return "ancestor"
    pid = rest[0]
    if not (pid.isdigit() or pid in ("self", "thread-self")):
        return "sensitive" if pid in table.machine_files else None
    rest = rest[1:]
    if len(rest) >= 1 and rest[0] == "task":
        if len(rest) <= 2:
            return "ancestor"
        rest = rest[2:]
    if not rest:
        return "ancestor"
    entry = rest[0]
    if entry == "fd" and pid in ("self", "thread-self") and len(rest) == 2:
        return None if rest[1] in table.own_fds else "sensitive"
    if ".." in rest:
        return "sensitive"  # through a link (cwd/.., root/..): wherever it leads
    return None if entry in table.process_entries else "sensitive"


def _pattern_kind(tokens: list[_Token]) -> str | None:
    table = _table()
    lead = "".join(t[1] for t in itertools.takewhile(lambda t: t[0] == "c", tokens))
    if not ("/proc/".startswith(lead) or lead.startswith("/proc/")):
        return None  # every path of concern starts so (`/usr/share/*.txt` cannot)
    dynamic = _DYN in tokens
    cuts = [i for i, t in enumerate(tokens) if t == ("c", "/") and i > 0] + [len(tokens)]
    for cut in cuts:
        head = tokens[:cut]
        if dynamic and _known(head) < _MIN_KNOWN:
            continue
        rx = _regex(head)
        if any(rx.fullmatch(p) for p in table.probes):
            return "sensitive"
    while len(tokens) > 1 and tokens[-1] == ("c", "/"):
        tokens = tokens[:-1]
    if dynamic and _known(tokens) < _MIN_KNOWN:
        return None
    rx = _regex(tokens)
    return "ancestor" if any(rx.fullmatch(p) for p in table.ancestors) else None


def _forms(path: str) -> list[str]:
    """``path`` as written, normalized, and through each symbolic link on the way (a link
    in the workspace to ``/proc/1/root``: the final target alone would say ``/etc/x``)."""
    forms = [path, os.path.normpath(path)]
    todo = [path] if len(path) < 4096 else []
    while todo and len(forms) < _MAX_LINKS:
        current = todo.pop()
        parts = current.split("/")
        for n in range(2, len(parts) + 1):
            prefix = "/".join(parts[:n])
            if prefix == "/proc" or prefix.startswith("/proc/"):
                break  # its links say what they mean to this process, not the command
            try:
                target = os.readlink(prefix)
            except (OSError, ValueError):
                continue
            rest = "/".join(parts[n:])
            joined = os.path.join(os.path.dirname(prefix), target, rest).rstrip("/")
            forms.append(joined)
            todo.append(joined)
            break
    return forms


def path_kind(word: Word, cwds: Sequence[Path], cwd_unknown: bool) -> tuple[str, str] | None:
    """(kind, shown path) when ``word`` may name a sensitive /proc path or a directory
    above them; relative words are taken from each directory the command may run in."""
    worst: tuple[str, str] | None = None
    for tokens in _tokens(word):
        for part in _path_parts(tokens):
            if not part:
                continue
            bases: list[list[_Token]] = [[]]
            if part[0] == ("c", "-"):
                continue  # an option; what it names after `=` or `/` is its own part
            if part[0] != ("c", "/"):
                bases = [[("c", c) for c in f"{d}/"] for d in cwds]
                if cwd_unknown:
                    bases.append([_DYN, ("c", "/")])
            for base in bases:
                full = base + part
                if all(t[0] == "c" for t in full):
                    text = "".join(t[1] for t in full)
                    kinds = [(k, f) for f in _forms(text) if (k := _literal_kind(f))]
                else:
                    k = _pattern_kind(full)
                    kinds = [(k, word.text)] if k else []
                for kind, shown in kinds:
                    if kind == "sensitive":
                        return kind, shown
                    worst = worst or (kind, shown)
    return worst


# --- the verdicts -----------------------------------------------------------------------


def _reads_trees(cmd: SimpleCommand) -> bool:
    """Whether the command may read the files below a directory it is given."""
    if not cmd.words or not cmd.words[0].literal:
        return True
    name = os.path.basename(cmd.words[0].text)
    if name == "find":
        return any(w.text in _EXEC_ACTIONS or not w.literal for w in cmd.words[1:])
    return name in _table().tree_readers


def check(
    commands: Sequence[SimpleCommand],
    cwds: Sequence[Path],
    cwd_unknown: bool,
    literals: dict[str, set[str]],
) -> list[CommandVerdict]:
    """Prompt verdicts for the commands of one command line that may read another
    process's state."""
    out: list[CommandVerdict] = []
    listed: list[tuple[SimpleCommand, str]] = []
    # the commands that run first: a wrapper's own words (`env -C /proc/1 cat environ`)
    # name the same paths, less clearly
    for cmd in sorted(commands, key=lambda c: c.strict_only):
        shown = cmd.display()
        # a command's name is only a path when it has a slash (else PATH is searched)
        named = cmd.words[:1] if cmd.words and "/" in cmd.words[0].text else ()
        words = [*named, *cmd.words[1:], *cmd.write_words, *cmd.reads]
        for w in words:
            hit = next(
                (k for r in devices.resolve(w, literals) if (k := path_kind(r, cwds, cwd_unknown))),
                None,
            )
            if hit is None:
                continue
            kind, path = hit
            if kind == "sensitive":
                out.append(CommandVerdict(shown, "prompt", RULE, None, f"names {path}: {WHY}"))
                break
            if _reads_trees(cmd) or w in cmd.reads:
                why = f"may read everything below {path}, including {WHY}"
                out.append(CommandVerdict(shown, "prompt", RULE, None, why))
                break
            listed.append((cmd, path))
    if listed and not out:
        runs_on_names = any(
            c.open_ended or any(w.kind == "dynamic" for w in c.words) for c in commands
        )
        if runs_on_names:
            cmd, path = listed[0]
            why = (
                f"lists {path} and runs a command on names only known at run time, which "
                f"may read {WHY}"
            )
            out.append(CommandVerdict(cmd.display(), "prompt", RULE, None, why))
    return out
