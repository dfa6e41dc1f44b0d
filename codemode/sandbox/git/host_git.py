"""git as codemode itself runs it on the host (the interactive ``/diff``): nothing in the
repository can make it run a program.

A program in workspace-write may have changed files git reads, so every setting that
names a command is overridden on the command line (``-c`` also reaches the git
processes it starts, through ``GIT_CONFIG_PARAMETERS``), the system and global config
files are not read, and the environment is scrubbed of variables that would run
something or point git elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from codemode.host_programs import host_program

# Each disables a way for repository config or attributes to run a command.
SAFE_CONFIG = (
    "core.fsmonitor=",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "core.sshCommand=false",
    "core.askPass=",
    "core.alternateRefsCommand=",
    "diff.external=",
    "diff.noprefix=false",
    "credential.helper=",
    "gpg.program=false",
    "sequence.editor=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "safe.bareRepository=explicit",
)
# Command-line flags that turn off external diff drivers and textconv filters.
SAFE_DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--ignore-submodules=all")
_DROP_ENV_PREFIXES = ("GIT_",)
_DROP_ENV = ("PAGER", "EDITOR", "VISUAL", "LESSOPEN", "SSH_ASKPASS")


def git_argv(*args: str) -> list[str]:
    """``git`` with the overrides, then ``args`` (flags for diff-like commands added)."""
    out = [host_program("git") or "/usr/bin/git", "--no-pager"]
    for item in SAFE_CONFIG:
        out += ["-c", item]
    if args and args[0] in ("diff", "show", "log"):
        return [*out, args[0], *SAFE_DIFF_FLAGS, *args[1:]]
    return [*out, *args]


def git_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for ``git_argv``: no ``GIT_*`` variables (``GIT_DIR``,
    ``GIT_EXTERNAL_DIFF``, ``GIT_CONFIG_*``...), no pager or editor, no system or
    global config, and filters cannot be looked up in ``$HOME``'s config."""
    base = dict(os.environ if env is None else env)
    out = {
        k: v
        for k, v in base.items()
        if not k.startswith(_DROP_ENV_PREFIXES) and k not in _DROP_ENV
    }
    out.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        PAGER="cat",
    )
    return out
