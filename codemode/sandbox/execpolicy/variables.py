"""Variables whose value changes what runs (``PATH``, ``LD_PRELOAD``, ``BASH_ENV``...).

The list is data (``variables.toml``); assigning such a variable in any way makes a
command need approval.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from importlib import resources

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@functools.cache
def _table() -> tuple[tuple[str, ...], frozenset[str]]:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("variables.toml")
    text = resource.read_text("utf-8")
    data = tomllib.loads(text)
    return tuple(data["risky"]), frozenset(data["harmless"])


@functools.cache
def risky_variable(name: str) -> bool:
    """Whether assigning ``name`` can change which program runs or what it loads."""
    risky, harmless = _table()
    if name in harmless:
        return False
    return any(fnmatch.fnmatchcase(name, g) for g in risky)


def is_identifier(text: str) -> bool:
    return bool(_IDENTIFIER.match(text))
