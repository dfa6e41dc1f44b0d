"""Sandbox settings: how commands are confined and when the user is asked.

Config file keys: ``sandbox_mode`` and ``approval_policy`` at the top level, the rest in
a ``[sandbox]`` table (``SandboxOptions``)::

    sandbox_mode = "workspace-write"     # read-only | workspace-write | danger-full-access
    approval_policy = "on-request"       # untrusted | on-request | never

    [sandbox]
    writable_roots = ["~/.cache/pip"]    # writable besides the workspace
    network_access = false
    env_allowlist = ["GITHUB_TOKEN"]     # credentials subprocesses may still see
    login_shell = false                  # bash -lc (reads the login profile; slow)
    backend = "auto"                     # auto | bubblewrap | landlock
    command_server = true                # bubblewrap: one sandbox per session, not per command
    seccomp = true
    rules = ["~/team.rules"]             # extra .rules files
    allow_unix_sockets = ["/run/user/1000/podman/podman.sock"]   # default: none
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from codemode.sandbox.env import DEFAULT_ENV_DENY

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ApprovalPolicy = Literal["untrusted", "on-request", "never"]
Backend = Literal["auto", "bubblewrap", "landlock"]


class SandboxOptions(BaseModel):
    """The ``[sandbox]`` table of the config file."""

    model_config = ConfigDict(extra="forbid")

    writable_roots: list[Path] = Field(
        default_factory=list,
        description="Directories writable in workspace-write mode besides the workspace.",
    )
    network_access: bool = Field(
        default=False, description="Let confined commands use the network (IP sockets)."
    )
    env_allowlist: list[str] = Field(
        default_factory=list,
        description="Names (globs allowed) of credential-like variables to pass on anyway.",
    )
    env_denylist: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ENV_DENY),
        description="Globs of variable names withheld from subprocesses.",
    )
    login_shell: bool = Field(
        default=False,
        description="Run commands with `bash -lc` (reads the login profile on every call) "
        "instead of `bash -c` with the environment of this process.",
    )
    backend: Backend = Field(
        default="auto",
        description="Confinement: bubblewrap when it works, else Landlock ('auto'), or force one.",
    )
    command_server: bool = Field(
        default=True,
        description="With bubblewrap, start one sandbox per session and each command inside "
        "it (a fork and an exec) instead of a new sandbox per command (several times "
        "the cost: docs/figures.md); "
        "the sandbox and the end of each command's processes are the same either way.",
    )
    seccomp: bool = Field(
        default=True,
        description="Also deny IP sockets (unless network_access) and ptrace with seccomp.",
    )
    rules: list[Path] = Field(
        default_factory=list, description="Extra .rules files, loaded after the user's."
    )
    allow_unix_sockets: list[Path] = Field(
        default_factory=list,
        description="Unix socket files confined commands may connect to (all others, and "
        "abstract sockets, are denied in the restricted modes; needs bubblewrap: Landlock "
        "cannot tell socket files apart).",
    )


class SandboxSettings(SandboxOptions):
    """Everything the sandbox needs to know: the two top-level keys plus the options."""

    sandbox_mode: SandboxMode = Field(
        default="workspace-write",
        description="read-only: nothing may be written; workspace-write: only the workspace "
        "and writable_roots (never .codemode/, .git or codemode's own files); "
        "danger-full-access: no "
        "confinement.",
    )
    approval_policy: ApprovalPolicy = Field(
        default="on-request",
        description="untrusted: ask before anything the rules do not allow; on-request: ask "
        "only for commands the rules mark `prompt`; never: never ask (a `prompt` command "
        "runs, confined by the sandbox mode).",
    )

    @classmethod
    def combine(
        cls,
        sandbox_mode: SandboxMode,
        approval_policy: ApprovalPolicy,
        options: SandboxOptions | None = None,
    ) -> SandboxSettings:
        """Settings from the config file's top-level keys and its ``[sandbox]`` table."""
        data = options.model_dump() if options is not None else {}
        return cls(sandbox_mode=sandbox_mode, approval_policy=approval_policy, **data)

    @property
    def restricted(self) -> bool:
        return self.sandbox_mode != "danger-full-access"

    def expanded_roots(self) -> list[Path]:
        return [Path(p).expanduser().resolve() for p in self.writable_roots]
