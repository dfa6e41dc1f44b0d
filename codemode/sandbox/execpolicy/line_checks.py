"""Checks over a whole command line, besides its simple commands one by one.

- ``fallback_commands``: for a line tree-sitter cannot parse, a rough split into
  commands that only the prompt and forbidden checks apply to, so what bash would still
  run (``{rm,-rf,/}``) stays forbidden.
- ``written_scripts`` / ``runs_written``: a file the line writes with literal content
  (``echo CMD > x.sh``) and later runs (``sh x.sh``, ``./x.sh``, ``. x.sh``) is decided
  by that content.
"""

from __future__ import annotations

import os.path
import re
import shlex

from codemode.sandbox.execpolicy.script_types import SimpleCommand, Stdin
from codemode.sandbox.execpolicy.words import Word, brace_expand
from codemode.sandbox.execpolicy.wrapper_table import shells

_PIECES = re.compile(r"[;&|\n()`]+|\$\(|[{}]\s")


def fallback_commands(script: str) -> list[SimpleCommand]:
    """For a script tree-sitter cannot parse: a rough split into commands (quotes removed,
    braces expanded) that only prompt and forbidden checks apply to, so that what bash
    would still run (``{rm,-rf,/}``) stays forbidden."""
    out = []
    for piece in _PIECES.split(script):
        try:
            lex = shlex.shlex(piece, posix=True, punctuation_chars="<>")
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError:
            tokens = piece.split()
        words: list[str] = []
        writes: list[str] = []
        tokens.reverse()
        while tokens:
            t = tokens.pop()
            if t.startswith("#"):
                break
            if t and set(t) <= set("<>") and ">" in t:  # `<> /dev/sda`, `>| x`: a write
                if tokens:
                    writes.append(os.path.expanduser(tokens.pop()))
                continue
            words += [os.path.expanduser(b) for b in brace_expand([(c, False) for c in t]) or [t]]
        if words or writes:
            out.append(
                SimpleCommand(
                    tuple(Word(w) for w in words),
                    piece.strip(),
                    strict_only=True,
                    writes=tuple(writes),
                    write_words=tuple(Word(w) for w in writes),
                )
            )
    return out


def _script_key(text: str) -> str:
    return os.path.normpath(text)


def written_scripts(found: list[tuple[SimpleCommand, Stdin | None]]) -> dict[str, str]:
    """Files this script writes with literal content (``echo CMD > x.sh``,
    ``cat > x.sh <<END``), by path, so that running them later in the line is judged."""
    out: dict[str, str] = {}
    for cmd, stdin in found:
        targets = [w for w in cmd.write_words if w.literal]
        if len(targets) != 1 or not cmd.words or not cmd.words[0].literal:
            continue
        name = os.path.basename(cmd.words[0].text)
        args = list(cmd.words[1:])
        text: str | None = None
        if name in ("echo", "printf") and all(w.literal for w in args):
            while args and args[0].text.startswith("-") and name == "echo":
                args = args[1:]
            text = " ".join(w.text for w in args).replace("\\n", "\n")
        elif name == "cat" and not args and stdin and stdin[0] in ("text", "pipe-text"):
            text = stdin[1].text if stdin[1] is not None and stdin[1].literal else None
        if text is not None:
            key = _script_key(targets[0].text)
            out[key] = out.get(key, "") + text + "\n"
    return out


def runs_written(cmd: SimpleCommand, written: dict[str, str]) -> str | None:
    if not written or not cmd.words or not cmd.words[0].literal:
        return None
    name = cmd.words[0].text
    if _script_key(name) in written and "/" in name:  # ./x.sh
        return written[_script_key(name)]
    base = os.path.basename(name)
    if base in shells() or base in ("source", "."):
        for w in cmd.words[1:]:
            if w.literal and w.text.startswith("-"):
                continue
            return written.get(_script_key(w.text)) if w.literal else None
    return None
