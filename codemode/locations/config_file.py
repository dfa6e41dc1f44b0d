"""Where the configuration lives and its raw contents: the file's TOML with the ``-c``
overrides merged in, not yet validated.

Kept apart from ``codemode.config`` (whose model needs pydantic, ~50 ms to import) so that a
command can look at the raw tables — ``interpreter run`` asks only which MCP servers are
configured — without paying for validation it may not need.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

# Re-exported: the one expansion of paths from the environment (``user_dirs``).
from codemode.locations import small_files
from codemode.locations.user_dirs import codemode_home as codemode_home

CONFIG_FILE = "config.toml"


class ConfigError(Exception):
    """A config file or override that cannot be used; the message says which and why."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=VALUE`` -> (["a", "b"], value). VALUE is read as TOML, else as a string.

    ``-c model="gpt-5"``, ``-c max_turns=5`` and ``-c code_mode=true`` get typed
    values; ``-c model=gpt-5`` (no quotes, not valid TOML) stays the string it looks like.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"-c {text!r}: expected key=value")
    path = [part.strip() for part in key.split(".")]
    if not all(path):
        raise ConfigError(f"-c {text!r}: empty part in key {key!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path, value


def set_path(data: dict[str, Any], path: list[str], value: Any, source: str) -> None:
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(path[: i + 1])
            raise ConfigError(f"{source}: {where} is a value, not a table")
        node = child
    node[path[-1]] = value


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML table in ``path``, or an empty one when the file does not exist."""
    try:
        text = small_files.read_text(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def raw_config(
    overrides: list[str] | tuple[str, ...] = (), *, home: Path | None = None
) -> tuple[Path, dict[str, Any]]:
    """The config file's path, and its table with ``overrides`` applied (unvalidated)."""
    path = (home or codemode_home()) / CONFIG_FILE
    data = read_config_file(path)
    for text in overrides:
        key_path, value = parse_override(text)
        set_path(data, key_path, value, f"-c {text}")
    return path, data
