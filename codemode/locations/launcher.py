"""The one door for every program codemode starts outside the sandbox.

git (the batch driver's and codemode's own checks), hooks, bubblewrap, the compiler for
helpers, node for doctor, ``gh``/``glab``, MCP servers from config: each runs with the
user's full authority. Before it starts, ``resolve`` checks

- the executable: a bare name is looked up along ``PATH`` outside every folder a
  confined command of this or an earlier session could have written
  (``host_programs``, ``written_roots``); a path must lie outside them;
- every file its command line names (``named_files``): an argument that is an existing
  file (``./x``, ``scripts/fmt.sh``, ``--config=tools/c.json``), the words of a
  ``sh -c`` string (and of a shell's ``-c`` string inside it), with its ``$VAR`` and
  ``${VAR}`` expanded from the environment the program gets, its globs expanded, and
  looked up from every folder it ``cd``s to as well, and the files a named build tool
  reads as what to run from its working folder (``make``: the Makefile,
  ``npm``/``yarn``: package.json, ...). One
  inside such a folder is refused unless the caller vouches for its content:
  ``trusted`` maps its real path to the sha256 the person accepted (hooks record it
  when trusted), and the file is hashed again just before the start.
  Callers whose arguments are data, not programs (git's refs and paths), pass
  ``names_files=False``;
- ``PATH`` in the environment it gets: entries that are relative or lie in such a
  folder are dropped, so a shell script it runs does not find a planted ``git`` either.

A refusal is ``LaunchRefused``, whose message names the file and why. What this cannot
see: files the started program reads on its own (a Makefile, a module search path); the
callers keep those out where they can (git's config, ``-I`` for Python).

``tests/test_launcher_guard.py`` fails on a start anywhere else in ``codemode/``.
"""

from __future__ import annotations

import asyncio
import functools
import glob
import hashlib
import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from codemode.locations.host_programs import host_program, writable_root_of, writable_roots

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh"})
# Files a program reads from its working folder as what to run, though no argument names
# them: a hook `make fmt` runs the Makefile's recipe, `npm run lint` package.json's script.
_IMPLIED = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "npm": ("package.json",), "pnpm": ("package.json",), "yarn": ("package.json",),
    "bun": ("package.json",), "just": ("justfile", "Justfile", ".justfile"),
    "rake": ("Rakefile",), "tox": ("tox.ini",), "nox": ("noxfile.py",),
    "task": ("Taskfile.yml", "Taskfile.yaml"),
}  # fmt: skip


class LaunchRefused(OSError):
    """A program, or a file its command line names, lies where a confined command could
    have written it (or cannot be found outside such places). An ``OSError``: to a
    caller, a program that may not start is one that cannot."""


def resolve(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    names_files: bool = True,
    trusted: Mapping[str, str] | None = None,
    path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """``argv`` with its program as an absolute path, once every check passed; raises
    ``LaunchRefused``. ``path``: the search path (default ``$PATH``); ``env``: the
    environment the program gets (default ``os.environ``: a shell string's variables)."""
    if not argv or not argv[0]:
        raise LaunchRefused("no program to start")
    roots = writable_roots()
    program = _program(argv[0], cwd, path, roots, trusted or {})
    if names_files:
        for name in named_files(argv, cwd, env):
            _check_named(name, roots, trusted or {})
    return [program, *argv[1:]]


def named_files(argv: Sequence[str], cwd: str | Path | None = None,
                env: Mapping[str, str] | None = None) -> list[str]:
    """The existing files ``argv`` names, as absolute paths (not yet resolved: the
    check looks at both spellings), its program's own file included when it has a
    slash. Words of a ``sh -c`` string count as arguments, and so do those of a shell's
    ``-c`` string inside it, with ``$VAR`` and ``${VAR}`` expanded from ``env`` (default
    ``os.environ``) and globs expanded; a word is also looked up from each folder the
    string ``cd``s to. What a shell string can name is not bounded (a loop, ``$(...)``):
    these are the spellings hooks are written with."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    words: list[str] = []
    shell: list[str] = []  # words of a shell string: expanded as the shell will
    string = _command_string(argv, 0)
    for i, word in enumerate(argv):
        words.append(word)
        if "=" in word and not word.startswith("="):
            words.append(word.split("=", 1)[1])
        if i == string:
            shell += _shell_words(word, os.environ if env is None else env)
    bases = [base]
    for before, word in zip(["", *shell], shell, strict=False):
        if before in ("cd", "pushd") and word and not word.startswith("-"):
            folder = Path(os.path.expanduser(word))
            bases.append(folder if folder.is_absolute() else base / folder)
    for word in shell:
        words.append(word)
        if "=" in word and not word.startswith("="):
            words.append(word.split("=", 1)[1])
    found: list[str] = []
    for word in list(words):
        words += _IMPLIED.get(os.path.basename(word), ())
    for word in words:
        if not word or (word.startswith("-") and "=" not in word):
            continue
        candidate = os.path.expanduser(word)
        for folder in bases if not os.path.isabs(candidate) else [base]:
            full = candidate if os.path.isabs(candidate) else str(folder / candidate)
            for match in _globbed(full) if word in shell else [full]:
                if os.path.isfile(match):
                    found.append(os.path.normpath(match))
    return list(dict.fromkeys(found))


def digest(path: str | Path) -> str:
    """The sha256 of a file's content (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def safe_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) with ``PATH`` kept to absolute entries outside
    every folder a command could have written."""
    out = dict(os.environ if env is None else env)
    if "PATH" in out:
        out["PATH"] = _safe_path(out["PATH"], writable_roots())
    return out


@functools.lru_cache(maxsize=32)
def _safe_path(path: str, roots: tuple[str, ...]) -> str:
    # (cached: hooks start around every tool call, with the same PATH each time)
    return os.pathsep.join(e for e in path.split(os.pathsep)
                           if e and os.path.isabs(e) and writable_root_of(e, roots) is None)


def run(argv: Sequence[str], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
        names_files: bool = True, trusted: Mapping[str, str] | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` of the checked ``argv``; raises ``LaunchRefused`` before
    anything starts."""
    checked = resolve(argv, cwd=cwd, names_files=names_files, trusted=trusted,
                      path=(env or os.environ).get("PATH"), env=env)
    return subprocess.run(checked, cwd=cwd, env=safe_env(env), **kwargs)


def popen(argv: Sequence[str], *, cwd: str | Path | None = None,
          env: Mapping[str, str] | None = None, names_files: bool = True,
          trusted: Mapping[str, str] | None = None, prefix: Sequence[str] = (),
          **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` of the checked ``argv``; ``prefix``: codemode's own program
    that starts it (the subreaper helper, from its protected cache), put in front once
    ``argv`` passed."""
    checked = resolve(argv, cwd=cwd, names_files=names_files, trusted=trusted,
                      path=(env or os.environ).get("PATH"), env=env)
    return subprocess.Popen([*prefix, *checked], cwd=cwd, env=safe_env(env), **kwargs)


async def start(argv: Sequence[str], *, cwd: str | Path | None = None,
                env: Mapping[str, str] | None = None, names_files: bool = True,
                **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec`` of the checked ``argv``."""
    checked = resolve(argv, cwd=cwd, names_files=names_files,
                      path=(env or os.environ).get("PATH"), env=env)
    return await asyncio.create_subprocess_exec(*checked, cwd=cwd, env=safe_env(env), **kwargs)


def _program(name: str, cwd: str | Path | None, path: str | None,
             roots: tuple[str, ...], trusted: Mapping[str, str]) -> str:
    if "/" not in name:
        found = host_program(name, path)
        if found is None:
            raise LaunchRefused(f"{name}: not found on PATH outside the folders commands "
                                "could write")
        return found
    full = name if os.path.isabs(name) else os.path.join(cwd or os.getcwd(), name)
    full = os.path.normpath(full)
    _check_named(full, roots, trusted)  # (a program whose content was trusted may run)
    return full


def _check_named(name: str, roots: tuple[str, ...], trusted: Mapping[str, str]) -> None:
    root = writable_root_of(name, roots)
    if root is None:
        return
    real = os.path.realpath(name)
    want = trusted.get(real)
    if want is None:
        raise LaunchRefused(_where(name, root) + ": its content was never trusted, so it "
                            "does not run")
    try:
        now = digest(real)
    except OSError as exc:
        raise LaunchRefused(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if now != want:
        raise LaunchRefused(f"{name} changed since it was trusted (a command may have "
                            "rewritten it): not run until it is trusted again")


def _where(name: str, root: str) -> str:
    return f"{name} lies in {root}, where a confined command could have written it"


def _command_string(words: Sequence[str], at: int) -> int | None:
    """Where the script string is when ``words[at]`` is a shell run with ``-c``
    (``sh -c S``, ``bash -lc S``, ``sh -e -c S``), else None."""
    if os.path.basename(words[at]) not in _SHELLS:
        return None
    i = at + 1
    while i < len(words) - 1 and words[i].startswith("-") and not words[i].startswith("--"):
        if "c" in words[i][1:]:
            return i + 1
        i += 1
    return None


# A variable as the shell expands it: $NAME or ${NAME} (its value, or nothing).
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# Globs expanded per word, at most (a word naming more is not a hook's spelling).
_GLOB_LIMIT = 256


def _shell_words(text: str, env: Mapping[str, str], depth: int = 0) -> list[str]:
    """The words of a shell string, their variables expanded from ``env``; the string of
    a shell's ``-c`` among them is split too (``bash -c 'sh x.sh'``)."""
    expanded = _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)
    try:
        lexer = shlex.shlex(expanded, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = [w for w in lexer if w and not set(w) <= set("();<>|&")]
    except ValueError:
        words = expanded.split()
    if depth < 4:
        for i in range(len(words)):
            string = _command_string(words, i)
            if string is not None:
                words += _shell_words(words[string], env, depth + 1)
    return words


def _globbed(path: str) -> list[str]:
    if not glob.has_magic(path):
        return [path]
    found = []
    for match in glob.iglob(path):
        found.append(match)
        if len(found) >= _GLOB_LIMIT:
            break
    return found or [path]
