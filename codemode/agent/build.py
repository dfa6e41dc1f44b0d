"""Putting a session together from configuration and command-line options."""

from __future__ import annotations

import platform
import shutil
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.agent.events import Notice
from codemode.agent.instructions import project_docs
from codemode.agent.loop import Session
from codemode.agent.rollout import (
    SESSIONS_DIR,
    RecordedSession,
    Rollout,
    SessionMeta,
    close_dangling_calls,
    new_session_id,
)
from codemode.agent.runner import Emit, ToolRunner
from codemode.agent.toolset import session_registry as session_registry  # re-exported
from codemode.agent.toolset import session_tools
from codemode.config import Config, ConfigError, codemode_home
from codemode.harnesses.base import Dialect, PromptEnv
from codemode.harnesses.catalog import get_harness
from codemode.js_runtime.models import Limits
from codemode.providers.base import Provider
from codemode.providers.sampling import Sampling
from codemode.tools.context import ToolContext

if TYPE_CHECKING:
    from codemode.harnesses.base import Harness
    from codemode.providers.catalog import ModelFacts

# The provider name a replayed session is recorded under (codemode.agent.replay).
REPLAY_PROVIDER = "replay"


@dataclass
class SessionOptions:
    """What the command line may set; None means "from the config"."""

    cwd: Path
    overrides: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    code_mode: bool | None = None
    harness: str | None = None
    max_turns: int | None = None
    sandbox_mode: str | None = None
    approval_policy: str | None = None
    full_auto: bool = False
    # Writable roots beyond the workspace (exec --add-dir).
    writable_roots: list[Path] = field(default_factory=list)


def sandbox_for(config: Config, options: SessionOptions, cwd: Path, approver: Any = None) -> Any:
    """The session's SandboxSession: config values, overridden by the command line."""
    from codemode.sandbox.cli_options import resolve_modes
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
    return SandboxSession(cwd, settings, approver=approver)


def resolve_provider(
    config: Config, name: str | None, notices: list[str] | None = None
) -> tuple[Provider, str]:
    """Open the configured provider; returns it and its name. Keys of its table that
    have no effect here add a line to ``notices``."""
    from codemode.providers.catalog import builtin_providers, open_provider, provider_info

    name = name or config.model_provider
    known = ", ".join(sorted(builtin_providers()))
    if name is None:
        raise ConfigError(
            "no model provider configured: pass --provider NAME or set model_provider in "
            f"{codemode_home() / 'config.toml'} (built in: {known})"
        )
    try:
        info = provider_info(name, config.model_providers.get(name, {}), notices)
    except KeyError:
        raise ConfigError(
            f"unknown provider {name!r}: define [model_providers.{name}] with base_url and "
            f"wire_api, or use one of: {known}"
        ) from None
    except ValueError as exc:
        raise ConfigError(f"[model_providers.{name}]: {_problems(exc)}") from None
    return open_provider(info), name


def _problems(exc: ValueError) -> str:
    """A validation error as one line: ``key: what is wrong; ...``."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
        for err in exc.errors()
    )


def pick_model(config: Config, provider_name: str, model: str | None) -> str:
    from codemode.providers.catalog import builtin_providers

    chosen = model or config.model
    if chosen is None:
        info = builtin_providers().get(provider_name)
        override = config.model_providers.get(provider_name, {})
        chosen = override.get("default_model") or (info.default_model if info else None)
    if not chosen:
        raise ConfigError(f"no model chosen for provider {provider_name!r}: pass --model NAME")
    return chosen


def session_sampling(
    config: Config, provider_name: str, model: str, overrides: list[str]
) -> Sampling:
    """Max output tokens, temperature, top_p and seed for this provider and model."""
    from codemode.providers.catalog import builtin_providers
    from codemode.providers.sampling import resolve_sampling

    entry = builtin_providers().get(provider_name)
    return resolve_sampling(
        catalog_entry=entry.model_dump() if entry is not None else None,
        top_level=config.model_dump(),
        provider_table=config.model_providers.get(provider_name),
        model_table=(
            config.model_settings[model].model_dump() if model in config.model_settings else None
        ),
        overrides=overrides,
    )


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


def family_harness(config: Config, provider_name: str | None) -> str:
    """The default harness for the provider's model family (Kimi -> kimi-code, ...)."""
    from codemode.harnesses.catalog import DEFAULT_HARNESS, default_harness
    from codemode.providers.catalog import builtin_providers

    name = provider_name or config.model_provider
    if name is None:
        return DEFAULT_HARNESS
    family = config.model_providers.get(name, {}).get("family")
    if family is None:
        info = builtin_providers().get(name)
        family = info.family if info is not None else None
    return default_harness(family)


# The harness for a model that cannot call tools: its actions are read from the text.
TEXT_HARNESS = "mini-swe-agent"


def _catalog_facts(provider_name: str, model: str) -> ModelFacts | None:
    from codemode.providers.catalog import model_facts

    return model_facts(provider_name, model) if model else None


def _fit_harness(
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


def _cli_version() -> str:
    try:
        return version("codemode")
    except PackageNotFoundError:
        return ""


def build_session(
    config: Config,
    options: SessionOptions,
    listeners: list[Emit],
    *,
    provider: Provider | None = None,
    provider_name: str | None = None,
    resume: RecordedSession | None = None,
    record: bool = True,
    approver: Any = None,
    default_engine: str = "quickjs",
) -> Session:
    """A ready session. ``provider`` replaces the configured one (replay, tests);
    ``resume`` continues a recorded session in its own file."""
    home = codemode_home()
    cwd = options.cwd.resolve()
    if resume is not None:
        meta = resume.meta
        # A replay's model was a recording: going on needs a live provider, the one
        # given or configured (with its own model).
        live = None if meta.provider == REPLAY_PROVIDER else meta.provider
        provider_name = options.provider or provider_name or live or config.model_provider
        if provider_name is None:
            raise ConfigError(
                f"session {meta.id} is a replay of a recording: there is no model to "
                "continue it with; pass --provider NAME (or set model_provider in "
                f"{home / 'config.toml'})"
            )
        model = options.model or config.model or (meta.model if live else "")
        harness_name = options.harness or meta.harness
        dialect: Dialect = (
            ("code" if options.code_mode else "classic")
            if options.code_mode is not None
            else meta.dialect  # type: ignore[assignment]
        )
    else:
        harness_name = (
            options.harness
            or config.harness
            or family_harness(config, options.provider or provider_name)
        )
        code_mode = options.code_mode if options.code_mode is not None else config.code_mode
        dialect = "code" if code_mode else "classic"
        model = ""
    harness = get_harness(harness_name, dialect)
    notices: list[str] = []
    if provider is None:
        provider, provider_name = resolve_provider(
            config, provider_name or options.provider, notices
        )
    assert provider_name is not None
    if not model:
        model = pick_model(config, provider_name, options.model)
    chose_harness = bool(options.harness or config.harness or resume is not None)
    facts = _catalog_facts(provider_name, model)
    harness = _fit_harness(harness, facts, model, dialect, chose_harness, notices)
    reasoning_effort = config.model_reasoning_effort
    if facts is not None and not facts.reasoning and reasoning_effort:
        notices.append(f"model_reasoning_effort is not sent: the catalog says {model} "
                       "does not reason")
        reasoning_effort = None

    sandbox = sandbox_for(config, options, cwd, approver)
    context = ToolContext(workspace=cwd, sandbox=sandbox)
    tools = session_tools(config, harness, cwd, notices)
    session_ref: list[Session] = []

    def emit(event: object) -> None:
        session_ref[0].emit(event)  # type: ignore[arg-type]

    engine = config.engine or default_engine
    runner = ToolRunner(
        tools.registry,
        context,
        emit,
        engine=engine,
        limits=Limits(timeout_s=config.exec_timeout_s, memory_mb=512, output_chars=30_000),
        setup_scripts=tools.setup_scripts,
        yield_time_ms=config.exec_yield_time_ms,
    )
    env = prompt_env(config, cwd, sandbox.settings.sandbox_mode, sandbox.settings.approval_policy)
    rollout: Rollout | None = None
    messages = []
    if resume is not None:
        messages = close_dangling_calls(resume.messages)
        runner.skip_ids(resume.item_count + len(resume.messages))
        if record:
            rollout = Rollout.append_to(resume.path)
            for added in messages[len(resume.messages) :]:
                rollout.record_message(added)
        session_id = resume.meta.id
    else:
        session_id = new_session_id()
        if record:
            meta = SessionMeta(
                id=session_id,
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                cwd=str(cwd),
                provider=provider_name,
                model=model,
                harness=harness.name,
                dialect=dialect,
                cli_version=_cli_version(),
            )
            rollout = Rollout.create(home / SESSIONS_DIR, meta)
    sampling = session_sampling(config, provider_name, model, options.overrides)
    session = Session(
        session_id=session_id,
        provider=provider,
        model=model,
        harness=harness,
        runner=runner,
        instructions=harness.instructions(env) + tools.skills_prompt,
        rollout=rollout,
        messages=messages,
        max_turns=options.max_turns or config.max_turns,
        reasoning_effort=reasoning_effort,
        sampling=sampling,
    )
    session.model_facts = facts
    session.context_window = facts.context_window if facts is not None else None
    session_ref.append(session)
    session.listeners.extend(listeners)
    for problem in tools.problems:
        session.emit(Notice(message=problem))
    for notice in notices:
        session.emit(Notice(message=notice))
    return session
