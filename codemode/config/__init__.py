"""User configuration: ``~/.codemode/config.toml`` plus ``-c key=value`` overrides.

The file and the overrides are merged as plain dictionaries first (an override's
dotted key reaches into nested tables: ``-c model_providers.local.base_url=...``),
then validated once into ``Config``, so a typo fails with the key's full path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codemode.locations.config_file import (
    CONFIG_FILE,
    ConfigError,
    codemode_home,
    parse_override,
    raw_config,
    read_config_file,
)
from codemode.providers.sampling import Sampling
from codemode.sandbox.settings import SandboxOptions

__all__ = [
    "CONFIG_FILE",
    "Config",
    "ConfigError",
    "codemode_home",
    "load_config",
    "parse_override",
    "read_config_file",
]


class ModelHarness(BaseModel):
    model_config = ConfigDict(extra="forbid")

    harness: str | None = None
    code_mode: bool | None = None


class Config(BaseModel):
    """Every setting a session reads. Unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    model_provider: str | None = None
    # Warm starts (docs/warm.md): read by the launcher itself, before this model loads
    # (``codemode.warm.place``); CODEMODE_WARM overrides it.
    warm: bool = True
    # Extra or overriding providers, merged over the built-in catalog by name.
    model_providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    model_reasoning_effort: str | None = None
    # Sampling for every provider and model (codemode.providers.sampling says how the
    # levels combine); [model_providers.NAME] takes the same keys for one provider and
    # [model_settings."MODEL"] for one model.
    max_output_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    model_settings: dict[str, Sampling] = Field(default_factory=dict)
    code_mode: bool = False
    harness: str | None = None
    # [model_harness."MODEL"]: the harness and dialect for one model (what
    # `interpreter eval --write-config` found it does best with); over `harness` and
    # `code_mode`, under the command line's --harness and --code-mode/--classic.
    model_harness: dict[str, ModelHarness] = Field(default_factory=dict)
    # The isolate for code-mode programs. Unset: QuickJS (fastest to start and to call
    # tools). Either runs in an engine worker process, so either stops at once when a
    # turn is interrupted.
    engine: Literal["quickjs", "v8"] | None = None
    max_turns: int = Field(default=50, gt=0)
    # Sessions one `interpreter acp` client may hold open at once (docs/acp.md).
    acp_max_sessions: int = Field(default=8, gt=0)
    sandbox_mode: Literal["read-only", "workspace-write", "danger-full-access"] = "workspace-write"
    approval_policy: Literal["untrusted", "on-request", "never"] = "on-request"
    # Seconds one code-mode program may run (wall clock, across yields).
    exec_timeout_s: float = Field(default=120.0, gt=0)
    # After this long a program still running hands control back to the model with its
    # output so far and a cell id, for the `wait` tool (0: at once).
    exec_yield_time_ms: int = Field(default=20_000, ge=0)
    # Characters of AGENTS.md given to the model, per file.
    project_doc_max_chars: int = Field(default=32_000, ge=0)
    # Validated by the MCP component when servers start.
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Validated here, so a bad [sandbox] table is a usage error before anything runs.
    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)
    # Hooks inline ([[hooks.PreToolUse]], [[hooks.PreToolUse.hooks]]), read by
    # codemode.hooks, which reports a bad entry without stopping the session.
    hooks: dict[str, Any] = Field(default_factory=dict)
    # Also run the hooks Codex and Claude Code users keep (.codex/hooks.json,
    # .claude/settings.json, in the project and the home): docs/hooks.md.
    hooks_from_other_agents: bool = False


def load_config(overrides: list[str] | tuple[str, ...] = (), *, home: Path | None = None) -> Config:
    """The config file under ``home`` with ``overrides`` applied, validated."""
    path, data = raw_config(overrides, home=home)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration ({path} and -c overrides): {problems}") from None
