"""Hooks that run a project's own tool (``make fmt``, ``npx prettier``, ``uv run``,
``pytest``, ``python -m``): the tool runs what the workspace holds, whatever the
command line names, so the hook's trust (the named files, their folders) does not cover
what runs. A person trusting such a hook is told so (``notes``); the programs and what
each loads are data (``project_runners.toml``)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Words before a command that run it (the command's name is the next word).
_WRAPPERS = ("then", "do", "else", "exec", "env", "time", "nohup", "command", "!")


@functools.cache
def _table() -> dict[str, Any]:
    with open(Path(__file__).with_name("project_runners.toml"), "rb") as f:
        return tomllib.load(f)


def notes(argv: list[str], cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> list[str]:
    """One line for each program of ``argv`` (a shell string's commands included) that
    runs project code: "`npx` runs code from the workspace's node_modules". A program
    named by its path (``./node_modules/.bin/prettier``, ``$CLAUDE_PROJECT_DIR/x.js``,
    looked up from ``cwd`` with ``env``'s variables) counts by the interpreter its
    ``#!`` line names."""
    table = _table()
    runners: dict[str, str] = table["runners"]
    module = table["module_flag"]
    out: list[str] = []
    for words in _commands(argv):
        for i, word in enumerate(words):
            name = os.path.basename(word)
            if name in runners:
                out.append(f"`{name}` runs code from {runners[name]}")
            elif (re.sub(r"[\d.]+$", "", name) in module["programs"]
                  and "-m" in words[i + 1:]):
                out.append(f"`{name} -m` runs code from {module['loads']}")
            elif "/" in word and (by := _interpreter(word, cwd, env)) in runners:
                out.append(f"`{name}` is run by `{by}`, which runs code from {runners[by]}")
            if "=" not in word:  # (past VAR=value words, the command's own name)
                break
    return list(dict.fromkeys(out))


def _interpreter(word: str, cwd: Path | None, env: Mapping[str, str] | None) -> str | None:
    """The program the ``#!`` line of the script ``word`` names (``env``'s argument
    for ``#!/usr/bin/env [-S] node``), its version digits dropped; None if none."""
    path = Path(_expand(word, env or os.environ))
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    try:  # (not blocking on a FIFO put in its place)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        first = os.read(fd, 256).split(b"\n", 1)[0]
    except OSError:
        return None
    finally:
        os.close(fd)
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return re.sub(r"[\d.]+$", "", os.path.basename(words[0])) if words else None


def _expand(word: str, env: Mapping[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                  lambda m: env.get(m.group(1), m.group(0)), word)


def _commands(argv: list[str]) -> list[list[str]]:
    """The word lists of the commands ``argv`` runs: itself, and each command of a
    ``-c`` string of a shell (split where a shell starts another), recursively."""
    found = [argv]
    for i, word in enumerate(argv[:-1]):
        if word == "-c" or (word.startswith("-") and word.endswith("c") and "-" not in word[1:]):
            for words in _split(argv[i + 1]):
                words = [w for w in words if w not in _WRAPPERS]
                if words:
                    found += _commands(words)
            break
    return found


def _split(text: str) -> list[list[str]]:
    """``text``'s simple commands, as a shell splits them (quotes kept together)."""
    lexer = shlex.shlex(text.replace("$(", "; ").replace("`", " ; "), posix=True,
                        punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token and all(c in "();<>|&" for c in token):
                commands.append([])
            else:
                commands[-1].append(token)
    except ValueError:  # (an unclosed quote: what was read so far)
        pass
    return [c for c in commands if c]
