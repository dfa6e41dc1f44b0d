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
    text = resources.files("codemode.sandbox").joinpath("wrappers.toml").read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def shells() -> frozenset[str]:
    return frozenset(wrapper_table()["shells"])
