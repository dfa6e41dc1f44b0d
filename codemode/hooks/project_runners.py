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
def table() -> dict[str, Any]:
    """``project_runners.toml``, read once."""
    with open(Path(__file__).with_name("project_runners.toml"), "rb") as f:
        return tomllib.load(f)


def notes(argv: list[str], cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> list[str]:
    """One line for each program of ``argv`` (a shell string's commands included) that
    runs project code: "`npx` runs code from the workspace's node_modules". A program
    named by its path (``./node_modules/.bin/prettier``, ``$CLAUDE_PROJECT_DIR/x.js``,
    looked up from ``cwd`` with ``env``'s variables) counts by the interpreter its
    ``#!`` line names."""
    table_ = table()
    runners: dict[str, str] = table_["runners"]
    module = table_["module_flag"]
    out: list[str] = []
    for words in _commands(argv):
        # Every word, not only the command's name: `timeout 5 make`, `xargs make`,
        # `nice make` start it too (a word that only names it costs a confined run).
        for i, word in enumerate(words):
            name = os.path.basename(word)
            if name in runners:
                out.append(f"`{name}` runs code from {runners[name]}")
            elif _versionless(name) in module["programs"]:
                if reads_cwd(words[i + 1:]):
                    out.append(f"`{name} {_how(words[i + 1:])}` runs code from "
                               f"{module['loads']}")
            elif (found := program_note(word, cwd, env)) is not None:
                out.append(found)
    return list(dict.fromkeys(out))


def program_note(word: str, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> str | None:
    """Why the program ``word`` names runs project code though its name is no runner's:
    its ``#!`` names one, or it is a toolchain proxy (``proxied``); None if neither."""
    runners: dict[str, str] = table()["runners"]
    if (by := _interpreter(word, cwd, env)) in runners:
        return (f"`{os.path.basename(word)}` is run by `{by}`, which runs code from "
                f"{runners[by]}")
    return proxied(word, env)


def proxied(word: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the program ``PATH`` finds for ``word`` runs what files of the workspace
    choose (a version manager's shim reading ``.tool-versions``, rustup's ``rustfmt``
    reading ``rust-toolchain.toml``, whose ``path = ...`` can name the workspace's own
    binaries: ``toolchain_proxies.toml``), or None."""
    if not word or "/" in word or word.startswith("-") or "=" in word:
        return None
    from codemode.locations.host_programs import host_program
    from codemode.sandbox.execpolicy.program_source import proxy_reason

    env = os.environ if env is None else env
    found = host_program(word, env.get("PATH", ""))
    if found is None or _pyenv_shim(found):
        return None
    why = proxy_reason(word, found)
    return f"{why}, a file a command could have written" if why else None


def _pyenv_shim(path: str) -> bool:
    """pyenv's shims: its ``.python-version`` names an installed version, never a path
    (``pyenv-version-file-read`` ignores one with ``/`` or ``..``), where asdf's and
    mise's ``path:`` runs the workspace's own."""
    folder = Path(path).parent
    return folder.name == "shims" and (folder.parent / "libexec" / "pyenv").exists()


def reads_cwd(args: list[str]) -> bool:
    """Whether a Python given ``args`` puts its working folder first on its module path:
    ``-m``, ``-c``, a script read from stdin (``-``, a here-document, none named). Not
    with ``-I`` or ``-P``, which leave it off."""
    safe = found = False
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in ("-W", "-X", "--check-hash-based-pycs"):  # (its value is the next word)
            skip = True
            continue
        if word == "-":
            found = True
            break
        if word.startswith("--") or not word.startswith("-") or len(word) < 2:
            if not word.startswith("-"):
                break  # (the script: its own folder goes on the path, not ours)
            continue
        flags = word[1:]
        safe = safe or bool({"I", "P"} & set(flags.split("m")[0].split("c")[0]))
        if any(f in flags for f in "mc"):
            found = True
            break
        if flags[-1] in "WX":
            skip = True
    else:
        found = True  # (no script named: it reads one from stdin)
    return found and not safe


def _how(args: list[str]) -> str:
    return next((w for w in args if w in ("-m", "-c", "-")), "with no script")


def _versionless(name: str) -> str:
    return re.sub(r"[\d.]+$", "", name)


def _interpreter(word: str, cwd: Path | None, env: Mapping[str, str] | None) -> str | None:
    """The program the ``#!`` line of the script ``word`` names (``env``'s argument
    for ``#!/usr/bin/env [-S] node``), its version digits dropped; None if none. A word
    without a slash is the program ``PATH`` finds (a global ``eslint`` is a Node script,
    and loads its config and plugins from the workspace)."""
    env = os.environ if env is None else env
    if not word or word.startswith("-") or "=" in word:
        return None
    if "/" not in word:
        from codemode.locations.host_programs import host_program

        found = host_program(word, env.get("PATH", ""))
        if found is None:
            return None
        word = found
    path = Path(_expand(word, env))
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
    return _versionless(os.path.basename(words[0])) if words else None


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
