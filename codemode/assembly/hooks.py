"""A session's hooks, from the configuration: found, filtered by trust, installed in
its tool pipeline and its approvals (``codemode.hooks``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from codemode.config import Config, codemode_home

if TYPE_CHECKING:
    from codemode.hooks.engine import HookEngine
    from codemode.sandbox.protocols import Sandbox
    from codemode.sandbox.session import SandboxSession
    from codemode.tools.registry import ToolRegistry


def attach_hooks(
    config: Config,
    cwd: Path,
    sandbox: SandboxSession,
    registry: ToolRegistry,
    notices: list[str],
    *,
    run_untrusted: bool = False,
    untrusted_hint: str = "",
) -> HookEngine | None:
    """The session's hook engine (None: no hook runs), installed in ``registry`` and
    ``sandbox``'s approvals; what to tell the person goes into ``notices``."""
    from codemode.hooks.loading import load_hooks, permission_mode
    from codemode.hooks.tool_calls import install

    settings = sandbox.settings
    loaded = load_hooks(
        cwd,
        codemode_home(),
        config_table=config.hooks,
        other_agents=config.hooks_from_other_agents,
        run_untrusted=run_untrusted,
        env_allow=list(settings.env_allowlist),
        env_deny=list(settings.env_denylist),
        permission_mode=permission_mode(settings.approval_policy, settings.sandbox_mode),
        untrusted_hint=untrusted_hint,
    )
    notices.extend(loaded.notices)
    if loaded.engine is not None:
        install(registry, loaded.engine, sandbox)
    return loaded.engine


def refresh_hooks(
    config: Config, cwd: Path, engine: HookEngine, sandbox: Sandbox
) -> None:
    """After the person trusted or disabled hooks: the session runs the trusted ones
    from its next call on."""
    from codemode.hooks.review import review
    from codemode.hooks.tool_calls import watch_approvals

    found = review(cwd, codemode_home(), config.hooks, config.hooks_from_other_agents)
    trusted = [hook for hook, state in found.rows if state == "trusted"]
    assert found.store is not None
    engine.set_hooks(trusted, {h.key: found.store.trusted_files(h) for h in trusted})
    watch_approvals(engine, sandbox)
