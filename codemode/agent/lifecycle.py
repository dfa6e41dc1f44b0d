"""A session's side of hooks (``codemode.hooks``): the lifecycle events, and each hook
run shown as an item.

The loop (``codemode.agent.loop``) calls these at the points of a session's life:
SessionStart (startup, resume, clear, compact) before the first request, and again
after a clear or a compaction; UserPromptSubmit before a prompt goes in; Stop when the
model has answered; PreCompact/PostCompact around a compaction; SessionEnd when the
session closes; PreModelRequest before each request to the model, and Interrupt when a
turn is interrupted (Codex's two events, in the shape Codex 0.169 and 0.171 give them:
``tests/data/codex-hooks/``). Tool events fire in the tool pipeline
(``codemode.hooks.tool_calls``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from codemode.agent.events import HookRunItem, ItemCompleted, ItemStarted, Notice
from codemode.agent.turn_result import TurnFailure
from codemode.hooks.definitions import INTERRUPT_TIMEOUT_S
from codemode.hooks.engine import Combined, HookEngine, HookRun

Emit = Callable[[BaseModel], None]
# Why hooks end a turn (``codemode.agent.turn_result.StopReason``'s values for them).
Ending = Literal["prompt_blocked", "hook_stopped"]


@dataclass
class Verdict:
    """What the loop does after some hooks ran: messages for the model before and after
    the prompt (or after the calls), or the turn's end (``refusal``: its message and
    why)."""

    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    refusal: tuple[str, Ending] | None = None


class SessionHooks:
    """The lifecycle events of one session's hooks, and their runs as items."""

    def __init__(self, engine: HookEngine, emit: Emit, next_id: Callable[[], str]) -> None:
        self.engine = engine
        self._emit = emit
        self._next_id = next_id
        self._items: dict[str, HookRunItem] = {}
        engine.listeners.append(self._on_run)
        self.started = False
        self._stop_active = False  # a Stop hook has blocked in this turn

    @classmethod
    def attach(cls, engine: HookEngine, emit: Emit, next_id: Callable[[], str],
               session_id: str, model: str, transcript: Path | None) -> SessionHooks:
        """The hooks of the session ``session_id`` (talking to ``model``, recorded in
        ``transcript``), which their runs are told about."""
        engine.facts.session_id, engine.facts.model = session_id, model
        if transcript is not None:
            engine.facts.transcript_path = str(transcript)
        return cls(engine, emit, next_id)

    # --- showing runs --------------------------------------------------------------

    def _on_run(self, run: HookRun) -> None:
        hook = run.hook
        outcome = run.outcome
        if outcome is None:
            item = HookRunItem(
                id=self._next_id(),
                parent_id=run.parent_id,
                event=run.event,
                command=hook.command,
                source=hook.source,
                status_message=hook.status_message,
            )
            self._items[run.id] = item
            self._emit(ItemStarted(item=item))
            return
        item = self._items.pop(run.id)
        item.duration_ms = run.duration_ms
        item.decision, item.reason = outcome.decision, outcome.reason
        item.additional_context = outcome.additional_context
        if outcome.failure is not None:
            item.status, item.error = "failed", outcome.failure
            default = ("the call was denied" if run.event == "PreToolUse"
                       else "the session goes on as if it had said nothing")
            self._emit(Notice(message=f"hook failed: {hook.describe()} {outcome.failure}; "
                              f"{default}"))
        elif outcome.decision in ("deny", "block"):
            item.status = "declined"
        else:
            item.status = "completed"
        if outcome.system_message:
            self._emit(Notice(message=f"hook: {outcome.system_message}"))
        self._emit(ItemCompleted(item=item))

    # --- lifecycle events ----------------------------------------------------------

    async def session_start(self, source: str) -> list[str]:
        """SessionStart; the messages with the context its hooks add for the model."""
        self.started = True
        answer = await self._fire("SessionStart", {"source": source}, (source,))
        return [f"[SessionStart hook context]\n{text}" for text in answer.context]

    async def before_prompt(self, prompt: str, source: str) -> Verdict:
        """A turn begins: SessionStart (``source``) if the session has not started for
        hooks yet, then UserPromptSubmit."""
        self._stop_active = False
        verdict = Verdict()
        if not self.started:
            verdict.before = await self.session_start(source)
        answer = await self.prompt_submit(prompt)
        if answer.decision == "block":
            verdict.refusal = (f"the prompt was blocked by {answer.reason_text()}",
                               "prompt_blocked")
            return verdict
        verdict.after = [f"[UserPromptSubmit hook context]\n{text}" for text in answer.context]
        verdict.refusal = self._stopped()
        return verdict

    async def prompt_context(
        self, prompt: str, source: str, model: str
    ) -> tuple[list[str], list[str]]:
        """SessionStart (once) and UserPromptSubmit for ``prompt`` to ``model``: the
        messages their hooks add before and after it. TurnFailure when a hook refuses
        the prompt or stops."""
        self.engine.facts.model = model
        verdict = await self.before_prompt(prompt, source)
        if verdict.refusal is not None:
            raise TurnFailure(*verdict.refusal)
        return verdict.before, verdict.after

    async def stop_context(self, answer: str) -> list[str]:
        """Stop hooks on ``answer``: the model's next message when one refused to let the
        turn end (its reason); TurnFailure when one stops it."""
        verdict = await self.stop_check(answer)
        if verdict.refusal is not None:
            raise TurnFailure(*verdict.refusal)
        return verdict.after

    async def stop_check(self, answer: str) -> Verdict:
        """The model answered: a Stop hook that blocks gives the model's next message
        (``after``); one that stops ends the turn."""
        if not self.engine.has("Stop"):
            return Verdict()
        said = await self.stop(answer, self._stop_active)
        verdict = Verdict(refusal=self._stopped())
        if said.decision == "block" and verdict.refusal is None:
            self._stop_active = True
            verdict.after = [f"[Stop hook] {said.reason_text()}"]
        return verdict

    def after_calls(self) -> Verdict:
        """A reply's calls are done: the context their hooks added outside a program,
        and the turn's end if one said ``continue: false``."""
        pending, self.engine.pending_context = self.engine.pending_context, []
        return Verdict(after=pending, refusal=self._stopped())

    def _stopped(self) -> tuple[str, Ending] | None:
        reason, self.engine.stop_request = self.engine.stop_request, None
        return None if reason is None else (f"a hook stopped the turn: {reason}", "hook_stopped")

    async def prompt_submit(self, prompt: str) -> Combined:
        return await self._fire("UserPromptSubmit", {"prompt": prompt})

    async def stop(self, last_message: str, active: bool) -> Combined:
        return await self._fire(
            "Stop", {"stop_hook_active": active, "last_assistant_message": last_message}
        )

    async def before_request(self) -> None:
        """PreModelRequest, before a request goes to the model. Codex's fields: ``kind``
        (``sampling``: every request of ours is one), a ``request_id`` of its own,
        ``attempt_number`` (1: a request the transport sends again after an error is
        the same attempt, as in Codex) and ``thread_id`` (the session). A hook that
        blocks (exit status 2, ``decision: "block"``) or stops ends the turn before the
        request is sent (TurnFailure); other answers change nothing, as in Codex."""
        if not self.engine.has("PreModelRequest"):
            return
        answer = await self._fire("PreModelRequest", {
            "kind": "sampling", "request_id": str(uuid.uuid4()), "attempt_number": 1,
            "thread_id": self.engine.facts.session_id,
        })
        if answer.decision == "block":
            self.engine.stop_request = None
            raise TurnFailure(f"the model request was blocked by {answer.reason_text()}",
                              "hook_stopped")
        refusal = self._stopped()
        if refusal is not None:
            raise TurnFailure(*refusal)

    async def interrupted(self, flush: Callable[[], None] | None = None) -> None:
        """Interrupt: the turn was interrupted (Ctrl-C or Esc, SIGINT, ACP's
        ``session/cancel``, a batch run stopped). Its hooks can only say something to
        the person (``systemMessage``): the turn has already ended. ``flush`` first puts
        the interrupted turn in the transcript they are told about (Codex flushes it
        too)."""
        if not self.engine.has("Interrupt"):
            return
        if flush is not None:
            flush()
        await self._fire("Interrupt", {})
        self.engine.stop_request = None

    def begin_turn(self) -> None:
        """A turn begins: hooks' input carries its ``turn_id`` (as Codex's does) until
        it ends."""
        self.engine.facts.turn_id = str(uuid.uuid4())

    def end_turn(self) -> None:
        self.engine.facts.turn_id = None

    async def compact(self, when: str, trigger: str) -> None:
        """PreCompact or PostCompact (``when``); trigger: manual or auto."""
        await self._fire(when, {"trigger": trigger}, (trigger,))

    async def session_end(self, reason: str) -> None:
        """SessionEnd. Fired from a task being cancelled (``exec``'s Ctrl-C closes the
        session): the person waits for the interrupt, so its hooks get at most an
        Interrupt hook's time, as Codex gives them always."""
        task = asyncio.current_task()
        hurried = task is not None and task.cancelling() > 0
        await self._fire("SessionEnd", {"reason": reason}, (reason,),
                         timeout_cap=INTERRUPT_TIMEOUT_S if hurried else None)

    async def _fire(
        self, event: str, fields: dict[str, Any], subjects: tuple[str, ...] = (),
        timeout_cap: float | None = None,
    ) -> Combined:
        if not self.engine.has(event):
            return Combined()
        answer = await self.engine.fire(event, fields, subjects, timeout_cap=timeout_cap)
        if answer.stop and self.engine.stop_request is None:
            self.engine.stop_request = answer.stop_reason or f"a {event} hook asked to stop"
        return answer
