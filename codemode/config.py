"""User configuration: ``~/.codemode/config.toml`` plus ``-c key=value`` overrides.

The file and the overrides are merged as plain dictionaries first (an override's
dotted key reaches into nested tables: ``-c model_providers.local.base_url=...``),
then validated once into ``Config``, so a typo fails with the key's full path.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CONFIG_FILE = "config.toml"


class ConfigError(Exception):
    """A config file or override that cannot be used; the message says which and why."""


def codemode_home() -> Path:
    """Where user data lives: ``$CODEMODE_HOME``, else ``~/.codemode``."""
    home = os.environ.get("CODEMODE_HOME")
    return Path(home).expanduser() if home else Path.home() / ".codemode"


class Config(BaseModel):
    """Every setting a session reads. Unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    model_provider: str | None = None
    # Extra or overriding providers, merged over the built-in catalog by name.
    model_providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    model_reasoning_effort: str | None = None
    code_mode: bool = False
    harness: str | None = None
    # The isolate for code-mode programs. Unset: QuickJS (fastest to start and to call
    # tools), except where a person can interrupt a turn (the interactive session,
    # ACP): there V8, because only a V8 program can be stopped at once (QuickJS runs on
    # the event-loop thread and stops only at its time limit).
    engine: Literal["quickjs", "v8"] | None = None
    max_turns: int = Field(default=50, gt=0)
    sandbox_mode: Literal["read-only", "workspace-write", "danger-full-access"] = "workspace-write"
    approval_policy: Literal["untrusted", "on-request", "never"] = "on-request"
    # Seconds one code-mode program may run.
    exec_timeout_s: float = Field(default=120.0, gt=0)
    # Characters of AGENTS.md given to the model, per file.
    project_doc_max_chars: int = Field(default=32_000, ge=0)
    # Tables other components own; validated by them.
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sandbox: dict[str, Any] = Field(default_factory=dict)


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


def _set_path(data: dict[str, Any], path: list[str], value: Any, source: str) -> None:
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
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def load_config(overrides: list[str] | tuple[str, ...] = (), *, home: Path | None = None) -> Config:
    """The config file under ``home`` with ``overrides`` applied, validated."""
    path = (home or codemode_home()) / CONFIG_FILE
    data = read_config_file(path)
    for text in overrides:
        key_path, value = parse_override(text)
        _set_path(data, key_path, value, f"-c {text}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration ({path} and -c overrides): {problems}") from None
