"""``build_session``: a finished ``Session`` from the configuration, the command line's
options and what the entry point supplies (``SessionSpec``).

Every entry point that runs a model session (``interpreter``, ``exec``, ``resume``,
``acp``) builds it here and only uses it afterwards; ``Session.aclose`` ends it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from codemode.agent.events import Notice, WorkspaceRecovered
from codemode.agent.loop import Session
from codemode.agent.rollout import (
    SESSIONS_DIR,
    Rollout,
    SessionMeta,
    close_dangling_calls,
    new_session_id,
)
from codemode.agent.runner import ToolRunner
from codemode.assembly.hooks import attach_hooks
from codemode.assembly.model import choose_model, open_resolved, provider_named
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.parts import (
    cli_version,
    family_harness,
    fit_harness,
    prompt_env,
    sandbox_for,
)
from codemode.assembly.toolset import session_tools
from codemode.config import Config, ConfigError, codemode_home
from codemode.harnesses.base import Dialect
from codemode.harnesses.catalog import get_harness
from codemode.js_runtime.models import AGENT_MEMORY_MB, Limits
from codemode.tools.context import ToolContext
from codemode.tools.store.recovery import recover_at_start

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

    from codemode.agent.rollout import RecordedSession
    from codemode.providers.base import Message
    from codemode.sandbox.session import SandboxSession

# The provider name a replayed session is recorded under (codemode.agent.replay).
REPLAY_PROVIDER = "replay"
# Characters of a code-mode program's console output (and of its value) that reach the
# model; beyond it head and tail are kept, the middle marked.
AGENT_OUTPUT_CHARS = 30_000


def live_provider(resume: RecordedSession) -> str | None:
    """The recorded provider, unless it was a replay's (no live model behind it)."""
    return None if resume.meta.provider == REPLAY_PROVIDER else resume.meta.provider


def _dialect(code_mode: bool) -> Dialect:
    return "code" if code_mode else "classic"


def build_session(
    config: Config, options: SessionOptions, spec: SessionSpec | None = None
) -> Session:
    """A ready session. ``spec.provider`` replaces the configured one (replay, tests);
    ``spec.resume`` continues a recorded session in its own file."""
    spec = spec or SessionSpec()
    cwd = options.cwd.resolve()
    # Before anything reads the workspace: what a killed patch or write left here is
    # rolled back (said once the session's listeners exist).
    recovered = recover_at_start(cwd, say=lambda _line: None)
    # First, so that its warm-up (the confinement probe, then the command server, on
    # other cores) runs while the rest is built: the first command waits for both.
    sandbox = sandbox_for(config, options, cwd, spec.approver)
    try:
        return _assemble(config, options, spec, cwd, sandbox, recovered)
    except BaseException:
        sandbox.close()
        raise


def _assemble(
    config: Config, options: SessionOptions, spec: SessionSpec, cwd: Path,
    sandbox: SandboxSession, recovered: list[str],
) -> Session:  # fmt: skip
    home = codemode_home()
    resume = spec.resume
    # A provider handed in (a replay) is recorded under the name it came with.
    handed_in = spec.provider is not None and spec.provider_name
    provider_name = spec.provider_name if handed_in else options.provider or spec.provider_name
    model: str | None
    harness_name: str | None
    if resume is not None:
        meta = resume.meta
        # A replay's model was a recording: going on needs a live provider, the one
        # given or configured (with its own model).
        live = live_provider(resume)
        provider_name = provider_name or live or config.model_provider
        if provider_name is None:
            raise ConfigError(
                f"session {meta.id} is a replay of a recording: there is no model to "
                "continue it with; pass --provider NAME (or set model_provider in "
                f"{home / 'config.toml'})"
            )
        model = options.model or config.model or (meta.model if live else None)
        harness_name = options.harness or meta.harness
        recorded_code = meta.dialect == "code"
        dialect = _dialect(options.code_mode if options.code_mode is not None else recorded_code)
    else:
        model = options.model
        harness_name = options.harness or config.harness
        code_mode = options.code_mode if options.code_mode is not None else config.code_mode
        dialect = _dialect(code_mode)
    notices: list[str] = []
    # A provider handed in (a replay, tests) may have a name neither the catalog nor
    # the config knows.
    resolved = provider_named(config, provider_name, notices, known=spec.provider is None)
    if harness_name is None:
        harness_name = family_harness(resolved)
    harness = get_harness(harness_name, dialect)
    provider = spec.provider or open_resolved(resolved)
    choice = choose_model(config, resolved, model, options.overrides)
    model = choice.model
    facts = choice.facts
    per_model = config.model_harness.get(model) if resume is None else None
    if per_model is not None and (options.harness is None or options.code_mode is None):
        # What `interpreter eval --write-config` chose for this model.
        code = options.code_mode if options.code_mode is not None else per_model.code_mode
        dialect = _dialect(code if code is not None else config.code_mode)
        harness_name = options.harness or per_model.harness or harness_name
        harness = get_harness(harness_name, dialect)
    chose_harness = bool(options.harness or config.harness or resume is not None
                         or (per_model is not None and per_model.harness))
    harness = fit_harness(harness, facts, model, dialect, chose_harness, notices)
    reasoning_effort = config.model_reasoning_effort
    if facts is not None and not facts.reasoning and reasoning_effort:
        notices.append(f"model_reasoning_effort is not sent: the catalog says {model} "
                       "does not reason")
        reasoning_effort = None

    context = ToolContext(workspace=cwd, sandbox=sandbox, client=spec.client)
    tools = session_tools(config, harness, cwd, notices)
    hooks = attach_hooks(
        config,
        cwd,
        sandbox,
        tools.registry,
        notices,
        run_untrusted=spec.run_untrusted_hooks,
        untrusted_hint=spec.untrusted_hooks_hint,
    )
    # The runner reports to the session, which exists only once the runner does.
    session_ref: list[Session] = []

    def emit(event: BaseModel) -> None:
        session_ref[0].emit(event)

    runner = ToolRunner(
        tools.registry,
        context,
        emit,
        engine=config.engine or spec.default_engine,
        limits=Limits(
            timeout_s=config.exec_timeout_s,
            memory_mb=AGENT_MEMORY_MB,
            output_chars=AGENT_OUTPUT_CHARS,
        ),
        setup_scripts=tools.setup_scripts,
        yield_time_ms=config.exec_yield_time_ms,
    )
    env = prompt_env(config, cwd, sandbox.settings.sandbox_mode, sandbox.settings.approval_policy)
    rollout: Rollout | None = None
    messages: list[Message] = []
    if resume is not None:
        messages = close_dangling_calls(resume.messages)
        runner.skip_ids(resume.item_count + len(resume.messages))
        if spec.record:
            rollout = Rollout.append_to(resume.path)
            for added in messages[len(resume.messages) :]:
                rollout.record_message(added)
        session_id = resume.meta.id
    else:
        session_id = spec.session_id or new_session_id()
        if spec.record:
            meta = SessionMeta(
                id=session_id,
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                cwd=str(cwd),
                provider=resolved.name,
                model=model,
                harness=harness.name,
                dialect=dialect,
                cli_version=cli_version(),
            )
            rollout = Rollout.create(home / SESSIONS_DIR, meta)
    instructions = harness.instructions(env) + tools.skills_prompt
    final_check = None
    strict_schema = None
    if spec.output_schema is not None:
        from codemode.agent import output_schema as schemas


        instructions += schemas.schema_instructions(spec.output_schema)
        final_check = schemas.final_check(spec.output_schema)
        if schemas.strict_compatible(spec.output_schema):
            strict_schema = spec.output_schema
    listeners: list[Callable[[BaseModel], None]] = list(spec.listeners)
    session = Session(
        session_id=session_id,
        provider=provider,
        model=model,
        harness=harness,
        runner=runner,
        instructions=instructions,
        rollout=rollout,
        messages=messages,
        max_turns=options.max_turns or config.max_turns,
        reasoning_effort=reasoning_effort,
        sampling=choice.sampling,
        model_facts=facts,
        listeners=listeners,
        final_check=final_check,
        output_schema=strict_schema,
        hooks=hooks,
        start_source="resume" if resume is not None else "startup",
    )
    session_ref.append(session)
    for line in recovered:
        session.emit(WorkspaceRecovered(message=line))
    for problem in tools.problems:
        session.emit(Notice(message=problem))
    for notice in notices:
        session.emit(Notice(message=notice))
    return session
