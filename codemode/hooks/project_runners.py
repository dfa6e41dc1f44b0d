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
import tomllib
from pathlib import Path
from typing import Any

# Words before a command that run it (the command's name is the next word).
_WRAPPERS = ("then", "do", "else", "exec", "env", "time", "nohup", "command", "!")


@functools.cache
def _table() -> dict[str, Any]:
    with open(Path(__file__).with_name("project_runners.toml"), "rb") as f:
        return tomllib.load(f)


def notes(argv: list[str]) -> list[str]:
    """One line for each program of ``argv`` (a shell string's commands included) that
    runs project code: "`npx` runs code from the workspace's node_modules"."""
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
            if "=" not in word:  # (past VAR=value words, the command's own name)
                break
    return list(dict.fromkeys(out))


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
