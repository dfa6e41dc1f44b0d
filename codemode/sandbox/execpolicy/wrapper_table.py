"""The wrapper table (``wrappers.toml``): which commands run other commands and how
their options are read, and which names are shells. A leaf module: the parser needs
the shells, ``unwrap`` the whole table."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any


@functools.cache
def wrapper_table() -> dict[str, Any]:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("wrappers.toml")
    text = resource.read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def shells() -> frozenset[str]:
    return frozenset(wrapper_table()["shells"])


_OPTION_KINDS = (  # riskiest first: an ambiguous prefix is taken for the first found
    "script_options",
    "command_options",
    "shell_options",
    "output_options",
    "chdir_options",
    "root_options",
    "replace_options",
    "pair_options",
    "value_options",
    "not_wrapping_options",
)


def long_option(option: str, spec: dict[str, Any]) -> str:
    """The long option a wrapper (getopt_long) takes ``option`` for: itself, or the
    option it is a prefix of (``env --sp=CMD`` is ``--split-string``)."""
    if len(option) < 3:
        return option
    for kind in _OPTION_KINDS:
        if option in spec.get(kind, ()):
            return option
    for kind in _OPTION_KINDS:
        names: list[str] = [str(o) for o in spec.get(kind, ())]
        found = sorted(o for o in names if o.startswith(option) and o[:2] == "--")
        if found:
            return found[0]
    return option
