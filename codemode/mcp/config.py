"""``[mcp_servers.NAME]`` tables: how to reach one server and which of its tools to use."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from codemode.config import ConfigError

# A server name becomes `tools.NAME` in code mode and part of `mcp__NAME__TOOL` in the
# classic dialect, so it must be a plain identifier without the `__` separator.
_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class McpServerConfig(BaseModel):
    """One configured server: a command to run over stdio, or a streamable-HTTP URL."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Header name -> environment variable holding its value (keeps tokens out of the file).
    env_headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    startup_timeout_s: float = Field(default=10.0, gt=0)
    tool_timeout_s: float = Field(default=60.0, gt=0)
    # None: every tool the server lists; otherwise only these (by the server's names).
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = Field(default_factory=list)
    # What the server's tools may be trusted with (see codemode.tools.base.Trust):
    # "read" lets them run in read-only mode and without asking; "write" lets them run
    # unasked in workspace-write (not in read-only); unset, every call is asked about
    # (refused where no one can answer) unless the approval policy is never, and
    # refused in read-only. The server's own readOnlyHint is not taken on its word.
    trust: Literal["read", "write"] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (stdio) or url (streamable HTTP), not both")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd apply to a command, not to a url")
        if self.command is not None and (self.headers or self.env_headers):
            raise ValueError("headers apply to a url, not to a command")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def http_headers(self) -> dict[str, str]:
        """``headers`` plus ``env_headers`` read from the environment now."""
        headers = dict(self.headers)
        for header, variable in self.env_headers.items():
            value = os.environ.get(variable)
            if value is None:
                raise ConfigError(
                    f"environment variable {variable} (for header {header}) is not set"
                )
            headers[header] = value
        return headers

    def wants_tool(self, name: str) -> bool:
        """Whether the server's tool ``name`` passes enabled_tools / disabled_tools."""
        if self.enabled_tools is not None and name not in self.enabled_tools:
            return False
        return name not in self.disabled_tools


def parse_mcp_servers(tables: dict[str, dict[str, Any]]) -> dict[str, McpServerConfig]:
    """Validate ``Config.mcp_servers``; a bad table raises ConfigError naming it."""
    servers: dict[str, McpServerConfig] = {}
    for name, table in tables.items():
        where = f"[mcp_servers.{name}]"
        if not _SERVER_NAME.match(name) or "__" in name:
            raise ConfigError(
                f"{where}: a server name must be letters, digits and single underscores, "
                "starting with a letter (it becomes tools.NAME in code mode)"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
        try:
            servers[name] = McpServerConfig.model_validate(table)
        except ValidationError as exc:
            problems = "; ".join(
                (f"{'.'.join(str(p) for p in err['loc'])}: " if err["loc"] else "")
                + err["msg"].removeprefix("Value error, ")
                for err in exc.errors()
            )
            raise ConfigError(f"{where}: {problems}") from None
    return servers
