"""The interactive loop: read a message or a slash command, run it, repeat.

A turn runs as a task; Esc or Ctrl-C cancels that task (the session records the turn as
interrupted, tool processes are killed) and the prompt comes back. At the prompt,
Ctrl-C clears the line, twice on an empty line exits; Ctrl-D exits.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from dataclasses import dataclass, replace
from typing import Any

from codemode.agent.events import ThreadStarted
from codemode.agent.loop import Session
from codemode.agent.rollout import SESSIONS_DIR, RecordedSession, find_session, read_session
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.parts import prompt_env
from codemode.assembly.session import build_session, live_provider
from codemode.config import Config, ConfigError, codemode_home, load_config
from codemode.harnesses.catalog import get_harness
from codemode.providers.base import Preparable
from codemode.tui.approval import TerminalApprover
from codemode.tui.mentions import expand_mentions
from codemode.tui.render import TerminalRenderer, make_console
from codemode.tui.snapshots import Snapshots

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class InteractiveOptions(SessionOptions):
    prompt: str | None = None
    # A session to reopen: an id or path, or "" for the newest.
    resume: str | None = None


class UsageProblem(Exception):
    """Bad options or configuration, found before the session starts."""


# What the session itself put before a message (after /undo), not what the user typed.
_INTERNAL_NOTE = re.compile(r"^\[The user reverted [^\]]*\]\s*")


class InteractiveApp:
    """One interactive run: the current session plus everything around it."""

    def __init__(self, options: InteractiveOptions, config: Config) -> None:
        from codemode.tui import hooks_command  # noqa: F401 (registers /hooks)
        from codemode.tui.commands import COMMANDS

        self.options = options
        self._cli_options = replace(options)  # as given, before any slash command
        self.config = config
        self.cwd = options.cwd.resolve()
        self.console = make_console()
        self.renderer = TerminalRenderer(self.console, workspace=self.cwd)
        self.reader: Any
        if sys.stdin.isatty() and sys.stdout.isatty():
            from codemode.tui.input import TerminalReader

            self.reader = TerminalReader(codemode_home() / "history", self.cwd, COMMANDS)
        else:
            from codemode.tui.input import PlainReader

            self.reader = PlainReader()
        self.approver = TerminalApprover(self.renderer, self.reader.ask)
        self.sandbox_mode: str = config.sandbox_mode
        self.approval_policy: str = config.approval_policy
        self.session: Session | None = None
        self.snapshots = Snapshots(self.cwd)
        # Said to the model with the next message (after /undo).
        self.pending_note: str | None = None
        self._provider_name = "?"
        self.done = False
        self._foreground: asyncio.Task[None] | None = None
        self._prepared: asyncio.Future[None] | None = None
        self._client_loading: asyncio.Future[None] | None = None
        self._told_disabled = False
        # A turn failed: with input piped in (no one watching), the exit status says so.
        self.turn_failed = False

    # --- sessions --------------------------------------------------------------------

    def open_session(self, resume: RecordedSession | None = None) -> Session:
        """Build a session (new or resumed) with the sandbox and approver attached,
        and make it the current one."""
        return self._install(self._build(resume), resume)

    def _build(self, resume: RecordedSession | None) -> Session:
        options = self.options
        if resume is not None:
            # A resumed session keeps its recorded settings unless the command line set
            # them; switches made in this session (/model, /code-mode, …) do not carry.
            cli = self._cli_options
            options = replace(
                options,
                model=cli.model,
                provider=cli.provider,
                harness=cli.harness,
                code_mode=cli.code_mode,
            )
        session = build_session(
            self.config,
            options,
            SessionSpec(
                listeners=[self.renderer],
                resume=resume,
                approver=self.approver,
                untrusted_hooks_hint=": review them with /hooks",
            ),
        )
        self.renderer.tools = session.runner.registry  # how each call shows: its tool's traits
        if resume is not None:  # what /new starts with from now on
            self.options.model, self.options.harness = session.model, session.harness.name
            self.options.provider = options.provider or live_provider(resume)
            self.options.code_mode = getattr(session.harness, "dialect", "classic") == "code"
        return session

    def _install(self, session: Session, resume: RecordedSession | None) -> Session:
        sandbox = session.runner.context.sandbox
        self.sandbox_mode = sandbox.sandbox_mode
        self.approval_policy = sandbox.approval_policy
        self._provider_name = (
            self.options.provider
            or (live_provider(resume) if resume is not None else None)
            or self.config.model_provider
            or "?"
        )
        self.session = session
        # The first snapshot for /undo is taken while the user types, and the model
        # client loads then too (a cold process's first request would wait for httpx).
        self._prepared = asyncio.ensure_future(asyncio.to_thread(self.snapshots.prepare))
        if isinstance(session.provider, Preparable):
            self._client_loading = asyncio.ensure_future(
                asyncio.to_thread(session.provider.prepare)
            )
        session.emit(ThreadStarted(thread_id=session.id))
        self.renderer.note(
            f"{session.model} via {self.provider_name()} · {session.harness.name} harness, "
            f"{getattr(session.harness, 'dialect', '?')} dialect · sandbox {self.sandbox_mode}, "
            f"approval {self.approval_policy}"
        )
        if resume is not None:
            turns = len(resume.prompt_indexes)
            self.renderer.note(
                f"resumed {session.model} · {session.harness.name} "
                f"{getattr(session.harness, 'dialect', '')} · {turns} earlier "
                f"turn{'s' if turns != 1 else ''}"
            )
            for index in resume.prompt_indexes[-3:]:
                text = _INTERNAL_NOTE.sub("", str(getattr(resume.messages[index], "text", "")))
                self.renderer.note(f"  › {' '.join(text.split())[:100]}")
        return session

    def provider_name(self) -> str:
        return self.options.provider or self._provider_name

    def set_permissions(self, sandbox_mode: str, approval_policy: str) -> None:
        self.sandbox_mode, self.approval_policy = sandbox_mode, approval_policy
        # A session built later (/new, /resume) keeps them.
        self.options.sandbox_mode, self.options.approval_policy = sandbox_mode, approval_policy
        self.options.full_auto = False
        if self.session is not None:
            self.session.set_permissions(sandbox_mode, approval_policy)

    def switch_harness(self, name: str, dialect: str) -> None:
        """Use harness ``name`` in ``dialect`` from the next model request on."""
        assert self.session is not None
        harness = get_harness(name, dialect)  # type: ignore[arg-type]
        env = prompt_env(self.config, self.cwd, self.sandbox_mode, self.approval_policy)
        self.session.set_harness(harness, harness.instructions(env))
        self.options.harness = name
        self.options.code_mode = dialect == "code"
        self.record_settings()

    def record_settings(self) -> None:
        """Note the current provider, model, harness and dialect in the session file,
        so that resuming it continues with them."""
        session = self.session
        if session is None or session.rollout is None:
            return
        recorded = session.rollout.meta or read_session(session.rollout.path).meta
        meta = recorded.model_copy(
            update={
                "provider": self.provider_name(),
                "model": session.model,
                "harness": session.harness.name,
                "dialect": getattr(session.harness, "dialect", "classic"),
            }
        )
        session.rollout.record_meta(meta)

    async def close_session(self, reason: str = "prompt_input_exit") -> None:
        """Close the session (``reason``: why, for its SessionEnd hooks)."""
        session, self.session = self.session, None
        if session is not None:
            await session.aclose(reason)

    async def replace_session(self, resume: RecordedSession | None = None) -> None:
        """/new and /resume: open another session in place of this one (which stays
        if the other cannot be opened). For hooks, /new clears: SessionEnd (clear) for
        this one, SessionStart (clear) for the next."""
        session = self._build(resume)
        if resume is None:
            session.start_source = "clear"
        await self.close_session("clear" if resume is None else "other")
        await self._wait_prepared()
        self.snapshots.close()
        self.snapshots = Snapshots(self.cwd)
        self._install(session, resume)

    async def _wait_prepared(self) -> None:
        """Let the background snapshot finish (shielded: a Ctrl-C must not leave it
        running beside the next scan)."""
        if self._prepared is None:
            return
        try:
            await asyncio.shield(self._prepared)
        except Exception as exc:
            self.renderer.note(f"! /undo snapshot failed: {exc}", style="yellow")
        self._prepared = None

    # --- turns -----------------------------------------------------------------------

    async def run_turn(self, text: str) -> None:
        assert self.session is not None
        expanded = expand_mentions(text, self.cwd)
        for problem in expanded.problems:
            self.renderer.note(f"! {problem}", style="yellow")
        if expanded.attached:
            self.renderer.note(f"attached: {', '.join(expanded.attached)}")
        prompt = expanded.text
        if self.pending_note:
            prompt = f"{self.pending_note}\n\n{prompt}"
            self.pending_note = None
        await self._wait_prepared()
        try:
            await asyncio.to_thread(self.snapshots.begin_turn)
        except Exception as exc:  # the turn matters more than its undo
            self.renderer.note(f"! /undo unavailable for this turn: {exc}", style="yellow")
        if self.snapshots.disabled and not self._told_disabled:
            self._told_disabled = True
            self.renderer.note(f"! /undo is off: {self.snapshots.disabled}", style="yellow")
        self.renderer.activity.model = self.session.model
        try:
            result = await self.session.run_turn(prompt)
            self.turn_failed = self.turn_failed or not result.ok
        finally:
            self.renderer.activity.end_turn()
            # An interrupted turn's changes can be undone too.
            try:
                changes = await asyncio.to_thread(self.snapshots.end_turn)
            except Exception as exc:
                changes = None
                self.renderer.note(f"! /undo unavailable for this turn: {exc}", style="yellow")
            if changes is not None:
                paths = changes.paths()
                more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
                self.renderer.note(f"changed: {', '.join(paths[:5])}{more} (/undo reverts)")
                if changes.unrestorable:
                    self.renderer.note(
                        f"! /undo cannot restore (too big to snapshot): "
                        f"{', '.join(changes.unrestorable[:5])}",
                        style="yellow",
                    )

    async def handle(self, line: str) -> None:
        """Run a message or a slash command in the foreground: Ctrl-C cancels it."""
        from codemode.tui.commands import run_command

        command = line.startswith("/") and not line.startswith("//")
        if command:
            work = run_command(self, line)
        elif line.strip():
            work = self.run_turn(line[1:] if line.startswith("//") else line)
        else:
            return
        task = asyncio.create_task(work)
        self._foreground = task
        # Installed for each task: prompt-toolkit removes SIGINT handlers when its input
        # line closes.
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
            routed = True
        except (NotImplementedError, RuntimeError, ValueError):
            routed = False  # not the main thread, or no signals here
        try:
            # Esc; a line typed ahead during a command is sent after it.
            with self.reader.watching(self.interrupt, submit=command):
                await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            self.renderer.note("interrupted · the session goes on")
        except Exception as exc:  # a bug in one turn must not end the session
            self.turn_failed = True
            self.renderer.note(f"internal error: {type(exc).__name__}: {exc}", style="red")
        finally:
            self._foreground = None
            if routed:
                loop.remove_signal_handler(signal.SIGINT)

    def interrupt(self) -> None:
        """SIGINT or Esc while no input line is up: stop what runs in the foreground."""
        if self._foreground is not None:
            self._foreground.cancel()

    # --- the loop --------------------------------------------------------------------

    async def loop(self) -> int:
        if self.options.prompt:
            self.console.print(f"› {self.options.prompt}", highlight=False, markup=False)
            await self.handle(self.options.prompt)
        interrupts = 0
        while not self.done:
            try:
                line = await self.reader.read()
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts >= 2:
                    break
                self.renderer.note("(Ctrl-C again or Ctrl-D to exit)")
                continue
            except EOFError:
                break
            interrupts = 0
            await self.handle(line)
        if self.turn_failed and not self.reader.interactive:
            return EXIT_FAILED
        return EXIT_OK


def run_interactive(options: InteractiveOptions) -> int:
    """The ``interpreter`` command; returns the exit status. Raises UsageProblem."""
    from codemode.agent.rollout import RolloutError
    from codemode.harnesses.catalog import UnknownHarnessError

    try:
        return asyncio.run(_main(options))
    except (ConfigError, RolloutError, UnknownHarnessError) as exc:
        raise UsageProblem(str(exc)) from None


async def _main(options: InteractiveOptions) -> int:
    config = load_config(options.overrides)
    app = InteractiveApp(options, config)
    resume = None
    if options.resume is not None:
        path = find_session(codemode_home() / SESSIONS_DIR, options.resume or None)
        resume = read_session(path)
    elif config.model_provider is None and options.provider is None and app.reader.interactive:
        from codemode.tui.wizard import first_run_setup

        if not await first_run_setup(app):
            return EXIT_USAGE
        app.config = config = load_config(options.overrides)
    try:
        if not await _open_first_session(app, resume):
            return EXIT_USAGE
        app.renderer.note("/help lists commands · Esc or Ctrl-C interrupts · Ctrl-D exits")
        return await app.loop()
    finally:
        session = app.session
        await app.close_session()
        await app._wait_prepared()
        app.snapshots.close()
        if session is not None and session.rollout is not None:
            app.renderer.note(f"session saved · interpreter resume {session.id}")



async def _open_first_session(app: InteractiveApp, resume: RecordedSession | None) -> bool:
    """Open the session; a provider key that is not set can be fixed on the spot."""
    from codemode.providers.base import MissingKeyError
    from codemode.tui.missing_key import fix_missing_key

    while True:
        try:
            app.open_session(resume)
            return True
        except MissingKeyError as problem:
            if not await fix_missing_key(app, problem):
                return False
