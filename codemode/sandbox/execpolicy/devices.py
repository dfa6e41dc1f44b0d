"""Writes to devices: forbidden however they are written.

``device_target`` says whether a path a command writes names a block device or another
part of the machine (``/dev/sda``, ``/proc/sysrq-trigger``); ``written_paths`` finds the
arguments of known writers (``tee``, ``cp``, ``dd of=``...) that name files they write.
The tables are data (``devices.toml``).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import os.path
import re
import tomllib
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from codemode.sandbox.execpolicy.words import Word


@functools.cache
def table() -> dict[str, Any]:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("devices.toml")
    text = resource.read_text("utf-8")
    return tomllib.loads(text)


def _normal(text: str, cwd: Path | None) -> str:
    if not os.path.isabs(text):
        text = os.path.join(str(cwd or "/"), text)
    text = os.path.normpath(text)
    while text.startswith("//"):  # normpath keeps a leading "//"; the kernel does not
        text = text[1:]
    return text


def _classify(path: str) -> bool:
    t = table()
    if path in t["harmless"] or any(fnmatch.fnmatchcase(path, g) for g in t["harmless_globs"]):
        return False
    if path == "/dev" or path.startswith("/dev/"):
        return True
    return any(fnmatch.fnmatchcase(path, g) for g in t["system"])


def device_target(word: Word, cwds: Sequence[Path] = (), *, follow: bool = True) -> str | None:
    """The device (or system file) that writing to ``word`` would write, else None.

    Relative paths are tried against every candidate working directory (``cd /dev &&
    cat x > sda``), globs by their text (``> /dev/sd?``), and symbolic links that exist
    now are followed.
    """
    if word.kind == "dynamic":
        return None
    text = word.text
    if not text:
        return None
    candidates: list[Path | None] = [*cwds] or [None]
    for cwd in candidates:
        path = _normal(text, cwd)
        if _classify(path):
            return path
        if follow and word.kind == "literal":
            try:
                real = os.path.realpath(path)
            except (OSError, ValueError):
                continue
            if real != path and _classify(real) and not _classify_harmless_link(path):
                return f"{path} (-> {real})"
    return None


def _classify_harmless_link(path: str) -> bool:
    # /dev/stdout -> /proc/self/fd/1 -> /dev/pts/3: the name was harmless already.
    t = table()
    return path in t["harmless"] or any(fnmatch.fnmatchcase(path, g) for g in t["harmless_globs"])


def names_device(word: Word, cwds: Sequence[Path] = ()) -> str | None:
    """Like ``device_target`` (by name only), also looking inside ``KEY=VALUE`` and
    ``--opt=VALUE``."""
    if "dev" not in word.text and "sys" not in word.text and "proc" not in word.text:
        return None  # the common case, cheaply
    found = device_target(word, cwds, follow=False)
    if found or word.kind == "dynamic":
        return found
    text = word.text
    if "=" in text:
        return device_target(Word(text.split("=", 1)[1], word.kind), cwds, follow=False)
    if text.startswith("-") and len(text) > 2 and "/" in text:  # -o/dev/sda
        return device_target(Word(text[text.index("/") :], word.kind), cwds, follow=False)
    return None


@functools.cache
def is_disk_tool(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in table()["disk_tools"])


def written_paths(name: str, args: Sequence[Word]) -> list[Word]:
    """The arguments that ``name`` (a known writer) writes to."""
    spec = table()["writers"].get(name)
    if spec is None:
        return []
    options = set(spec["options"])
    keys = set(spec.get("assignments", []))
    out: list[Word] = []
    plain: list[Word] = []
    i = 0
    done = False
    while i < len(args):
        w = args[i]
        t = w.text
        if not done and w.literal and t == "--":
            done = True
        elif not done and w.literal and t.startswith("-") and t != "-":
            opt, eq, value = t.partition("=")
            if opt in options:
                if eq:
                    out.append(Word(value))
                elif i + 1 < len(args):
                    out.append(args[i + 1])
                    i += 1
            elif not t.startswith("--") and t[:2] in options and len(t) > 2:
                out.append(Word(t[2:]))
        elif w.literal and "=" in t and t.split("=", 1)[0] in keys:
            out.append(Word(t.split("=", 1)[1]))
        else:
            plain.append(w)
        i += 1
    if spec["positionals"] == "all":
        out += plain
    elif spec["positionals"] == "last" and len(plain) >= 2:
        out.append(plain[-1])
    return out


_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=+?]([^}$`]*)\}")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def resolve(word: Word, literals: dict[str, set[str]]) -> list[Word]:
    """``word``, and for ``$NAME`` / ``"${NAME}"`` words the literal values the script
    assigns to NAME (``d=/dev/sda; cat x > $d``) or the word with the literal defaults of
    its ``${NAME:-DEFAULT}`` expansions."""
    if word.kind != "dynamic":
        return [word]
    defaults = _DEFAULT.sub(lambda m: m[1], word.text).replace('"', "")
    if defaults != word.text and "$" not in defaults and "`" not in defaults:
        return [word, Word(defaults)]  # `> ${d:-/dev/sda}`
    if not literals:
        return [word]
    names = {a or b for a, b in _VAR.findall(word.text)}
    if len(names) != 1:
        return [word]
    (name,) = names
    out = [word]
    for value in literals.get(name, ()):
        text = _VAR.sub(_constant(value), word.text).replace('"', "")
        if "$" not in text and "`" not in text:
            out.append(Word(text))
    return out


def _constant(value: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement inserting ``value`` as is (no backslash escapes)."""
    return lambda _match: value
