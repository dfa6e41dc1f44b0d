"""The pieces of a session that do not depend on each other: its sandbox, its tool
set, the facts its prompt mentions, its harness and its skills."""

from __future__ import annotations

import platform
import shutil
from datetime import date
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.agent.instructions import project_docs
from codemode.assembly.options import SessionOptions
from codemode.config import Config, codemode_home
from codemode.harnesses.base import Dialect, PromptEnv
from codemode.harnesses.catalog import get_harness

if TYPE_CHECKING:
    from codemode.harnesses.base import Harness
    from codemode.providers.catalog import ModelFacts, ResolvedProvider
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.session import SandboxSession

# The harness for a model that cannot call tools: its actions are read from the text.
TEXT_HARNESS = "mini-swe-agent"


def sandbox_for(
    config: Config, options: SessionOptions, cwd: Path, approver: Approver | None = None
) -> SandboxSession:
    """The session's SandboxSession: config values, overridden by the command line."""
    from codemode.sandbox.modes import resolve_modes
    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings

    mode, policy = resolve_modes(
        options.sandbox_mode,
        options.approval_policy,
        options.full_auto,
        default_mode=config.sandbox_mode,
        default_policy=config.approval_policy,
    )
    extra = config.sandbox.model_copy(deep=True)  # validated with the config
    # exec --add-dir: more writable roots for this session only.
    extra.writable_roots = [*extra.writable_roots, *(p.resolve() for p in options.writable_roots)]
    settings = SandboxSettings.combine(mode, policy, extra)  # type: ignore[arg-type]
    session = SandboxSession(cwd, settings, approver=approver)
    session.prewarm()
    return session


def prompt_env(config: Config, cwd: Path, sandbox_mode: str, approval_policy: str) -> PromptEnv:
    """The facts a harness prompt mentions (the interactive session rebuilds the
    instructions with it when the harness or dialect changes)."""
    return PromptEnv(
        cwd=str(cwd),
        date=date.today().isoformat(),
        platform=f"{platform.system()} {platform.machine()}",
        shell="bash" if shutil.which("bash") else "sh",
        sandbox_mode=sandbox_mode,
        approval_policy=approval_policy,
        project_docs=project_docs(cwd, codemode_home(), config.project_doc_max_chars),
    )


def family_harness(provider: ResolvedProvider | None) -> str:
    """The default harness for the provider's model family (Kimi -> kimi-code, ...)."""
    from codemode.harnesses.catalog import DEFAULT_HARNESS, default_harness

    if provider is None:
        return DEFAULT_HARNESS
    return default_harness(provider.family)


def fit_harness(
    harness: Harness,
    facts: ModelFacts | None,
    model: str,
    dialect: Dialect,
    chosen: bool,
    notices: list[str],
) -> Harness:
    """The harness for a model the catalog says cannot call tools: one whose actions are
    read from the reply text, unless one was chosen (then a warning)."""
    from codemode.harnesses.table import TextHarness

    if facts is None or facts.tool_calling or isinstance(harness, TextHarness):
        return harness
    if chosen:
        notices.append(f"warning: the catalog says {model} cannot call tools, which the "
                       f"{harness.name} harness needs; --harness {TEXT_HARNESS} reads "
                       "actions from the reply text")
        return harness
    notices.append(f"the catalog says {model} cannot call tools: using the {TEXT_HARNESS} "
                   "harness, which reads actions from the reply text")
    return get_harness(TEXT_HARNESS, dialect)


def cli_version() -> str:
    try:
        return version("codemode")
    except PackageNotFoundError:
        return ""
