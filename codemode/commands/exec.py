"""``interpreter exec`` (and ``resume``): run turns without a human, report, exit.

Exit status: 0 every turn completed, 1 a turn failed, 2 bad configuration or usage,
130 interrupted (the session file then ends with the failed turn and resumes cleanly).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from codemode.agent.codex_compat import translate_overrides
from codemode.agent.events import ThreadStarted
from codemode.agent.images import ImageProblem, load_image
from codemode.agent.loop import Session
from codemode.agent.output_schema import SchemaProblem, load_schema
from codemode.agent.printers import HumanPrinter, JsonPrinter
from codemode.agent.rollout import SESSIONS_DIR, RolloutError, find_session, read_session
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import REPLAY_PROVIDER, build_session
from codemode.config import ConfigError, codemode_home, load_config
from codemode.harnesses.catalog import UnknownHarnessError
from codemode.process import interruptible
from codemode.providers.base import AuthenticationError, ImageInput
from codemode.terminal.control_chars import echo

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageProblem(Exception):
    """Bad options or configuration: one line on stderr, exit status 2."""


@dataclass
class ExecOptions(SessionOptions):
    prompt: str | None = None
    as_json: bool = False
    replay: Path | None = None
    # A session to continue: an id, a path, or "" for the newest.
    resume: str | None = None
    # Codex-compatible exec options (the Codex SDK passes these).
    images: list[Path] = field(default_factory=list)
    output_schema: Path | None = None
    # Run project hooks nobody trusted (they are skipped, with one notice, otherwise).
    trust_project_hooks: bool = False


# What exec's one notice about a project's untrusted hooks adds.
UNTRUSTED_HOOKS_HINT = (
    ": review them with `interpreter hooks list`, trust them with `interpreter hooks "
    "trust`, or pass --trust-project-hooks"
)


def run_exec(options: ExecOptions) -> int:
    """Run the command; returns its exit status. Raises UsageProblem for bad input."""
    try:
        status = interruptible.run(_run(options))
    except (
        ConfigError,
        RolloutError,
        UnknownHarnessError,
        ImageProblem,
        SchemaProblem,
        AuthenticationError,
    ) as exc:
        raise UsageProblem(str(exc)) from None
    return status


async def _run(options: ExecOptions) -> int:
    compat = translate_overrides(options.overrides)
    for notice in compat.notices:
        echo(f"note: {notice}", err=True)
    options.overrides = compat.overrides
    config = load_config(options.overrides)
    if compat.openai_base_url and config.model_provider is None and options.provider is None:
        options.provider = "openai"
    images = [load_image(path) for path in options.images]
    schema = load_schema(options.output_schema) if options.output_schema else None
    printer = JsonPrinter() if options.as_json else HumanPrinter()
    prompts: list[str]
    replayed = None
    if options.replay is not None:
        from codemode.agent.replay import replay_plan

        recorded = read_session(options.replay)
        prompts, provider = replay_plan(recorded)
        if options.prompt is not None:
            raise UsageProblem("--replay runs the recorded prompts; do not pass a PROMPT")
        if not prompts:
            raise UsageProblem(f"{options.replay} has no recorded prompts to replay")
        options.harness = options.harness or recorded.meta.harness
        if options.code_mode is None:
            options.code_mode = recorded.meta.dialect == "code"
        options.model = options.model or recorded.meta.model
        from codemode.agent.replay_check import Outcomes

        replayed = Outcomes()
        spec = SessionSpec(
            listeners=[printer, replayed],
            provider=provider,
            provider_name=REPLAY_PROVIDER,
            output_schema=schema,
        )
    else:
        if not options.prompt or not options.prompt.strip():
            raise UsageProblem("no prompt given (pass PROMPT, or - to read it from stdin)")
        prompts = [options.prompt]
        resume = None
        if options.resume is not None:
            path = find_session(codemode_home() / SESSIONS_DIR, options.resume or None)
            resume = read_session(path)
        spec = SessionSpec(listeners=[printer], resume=resume, output_schema=schema)
    spec.run_untrusted_hooks = options.trust_project_hooks
    spec.untrusted_hooks_hint = UNTRUSTED_HOOKS_HINT
    session = build_session(config, options, spec)
    status = await _drive(session, prompts, images)
    if replayed is not None and options.replay is not None and status != EXIT_INTERRUPTED:
        from codemode.agent.replay_check import difference, recorded_outcomes

        differs = difference(recorded_outcomes(options.replay), replayed)
        if differs:
            echo(
                f"replay: the tools did not do what they did in the recording: {differs}. "
                f"The recorded replies no longer fit (it ran in {recorded.meta.cwd}): run "
                "it in a copy of that workspace with -C DIR.",
                err=True,
            )
            status = EXIT_FAILED
    return status


async def _drive(
    session: Session, prompts: list[str], images: list[ImageInput] | None = None
) -> int:
    session.emit(ThreadStarted(thread_id=session.id))
    status = EXIT_OK
    try:
        for i, prompt in enumerate(prompts):
            result = await session.run_turn(prompt, images if i == 0 else None)
            if not result.ok:
                status = EXIT_FAILED
                break
    except asyncio.CancelledError:
        status = EXIT_INTERRUPTED
    finally:
        await session.aclose()
    return status
