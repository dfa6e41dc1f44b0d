"""The hooks a session runs: discovered, filtered by trust, made into an engine."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # (imported when hooks are found: a run with none does not load pydantic for them)
    from codemode.hooks.definitions import HookDef
    from codemode.hooks.engine import HookEngine
    from codemode.hooks.trust import State


@dataclass
class LoadedHooks:
    """Every hook found with its state, the engine that runs the trusted ones (None:
    no hook was found, and nothing is installed anywhere), and what to tell the person
    once."""

    found: list[tuple[HookDef, State]] = field(default_factory=list)
    engine: HookEngine | None = None
    notices: list[str] = field(default_factory=list)


def load_hooks(
    cwd: Path,
    home: Path,
    *,
    config_table: Any = None,
    other_agents: bool = False,
    run_untrusted: bool = False,
    env_allow: list[str] | None = None,
    env_deny: list[str] | None = None,
    permission_mode: str = "default",
    untrusted_hint: str = "",
) -> LoadedHooks:
    """The session's hooks. ``run_untrusted``: project hooks run without being trusted
    (an explicit flag, for automation that validated them elsewhere). ``untrusted_hint``
    ends the one notice about project hooks that do not run."""
    from codemode.hooks.discovery import discover
    from codemode.hooks.engine import HookEngine, SessionFacts
    from codemode.hooks.trust import TrustStore

    discovered = discover(cwd, home, config_table, other_agents=other_agents)
    store = TrustStore(home, cwd)
    out = LoadedHooks(notices=list(discovered.problems))
    if store.problem:
        out.notices.append(store.problem)
    running: list[HookDef] = []
    files: dict[str, dict[str, str]] = {}
    skipped = 0
    for hook in discovered.hooks:
        state = store.state(hook)
        out.found.append((hook, state))
        if state == "trusted":
            running.append(hook)
            files[hook.key] = store.trusted_files(hook)
        elif state == "untrusted" and run_untrusted:
            # Validated elsewhere as they are now: a program's later change still stops it.
            running.append(hook)
            files[hook.key] = store.named(hook)
        elif state == "untrusted" and (changed := store.changed(hook)):
            out.notices.append(_changed_notice(hook, changed, store.has_files(hook),
                                               store.never(hook)))
        elif state == "untrusted":
            skipped += 1
    if skipped:
        out.notices.append(
            f"{skipped} project hook{'s' if skipped != 1 else ''} not trusted yet, so not "
            f"run{untrusted_hint}"
        )
    if out.found:  # (an engine with none running yet: trusting one starts it)
        from codemode.sandbox.env import DEFAULT_ENV_DENY, scrub_environment

        env = scrub_environment(
            os.environ, allow=env_allow or (), deny=env_deny if env_deny is not None
            else DEFAULT_ENV_DENY,
        )
        facts = SessionFacts(cwd=cwd, permission_mode=permission_mode)
        out.engine = HookEngine(running, facts, env=env, trusted_files=files)
    return out


def _changed_notice(hook: HookDef, changed: list[str], was_trusted: bool,
                    never: list[str]) -> str:
    from codemode.terminal.control_chars import visible

    if never:  # (trusting it again would not help)
        return visible(f"hook {hook.key} ({hook.describe()}) not run: {'; '.join(never)}")

    what = ("which is not the content that was trusted" if was_trusted
            else "whose content was never trusted")
    # (a folder: the one its script loads modules from, ``script_folders``)
    shown = [f"{c}/ (its script's folder)" if os.path.isdir(c) else c for c in changed]
    return visible(
        f"hook {hook.key} ({hook.describe()}) not run: it names {', '.join(shown)}, which "
        f"a command could have written and {what}; check it, then `interpreter hooks trust "
        f"{hook.key}`")


def permission_mode(approval_policy: str, sandbox_mode: str) -> str:
    """Claude Code's and Codex's ``permission_mode`` for our policy and mode."""
    if approval_policy == "never" and sandbox_mode == "danger-full-access":
        return "bypassPermissions"
    return "dontAsk" if approval_policy == "never" else "default"


def program_hooks(
    cwd: Path,
    raw: dict[str, Any] | None = None,
    *,
    sandbox: Any = None,
    run_untrusted: bool = False,
    untrusted_hint: str = "",
) -> LoadedHooks:
    """The hooks a program run without a model (``interpreter run``, a batch worker)
    obeys: the same ones a session in ``cwd`` would, from the raw config table ``raw``
    (read from the config file when None). ``sandbox``: its settings (a model or a
    mapping), for the withheld environment variables."""
    from codemode.hooks.places import any_hooks
    from codemode.locations.config_file import ConfigError, codemode_home, raw_config

    if raw is None:
        try:
            raw = raw_config()[1]
        except ConfigError as exc:
            return LoadedHooks(notices=[str(exc)])
    if not any_hooks(cwd, codemode_home(), raw):
        return LoadedHooks()
    settings = sandbox if isinstance(sandbox, dict) else (
        sandbox.model_dump() if sandbox is not None else {})
    return load_hooks(
        cwd.resolve(),
        codemode_home(),
        config_table=raw.get("hooks"),
        other_agents=bool(raw.get("hooks_from_other_agents")),
        run_untrusted=run_untrusted,
        env_allow=list(settings.get("env_allowlist") or []),
        env_deny=settings.get("env_denylist"),
        permission_mode=permission_mode(str(settings.get("approval_policy", "")),
                                        str(settings.get("sandbox_mode", ""))),
        untrusted_hint=untrusted_hint,
    )
