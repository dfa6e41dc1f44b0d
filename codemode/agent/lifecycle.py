"""A session's side of hooks (``codemode.hooks``): the lifecycle events, and each hook
run shown as an item.

The loop (``codemode.agent.loop``) calls these at the points of a session's life:
SessionStart (startup, resume, clear, compact) before the first request, and again
after a clear or a compaction; UserPromptSubmit before a prompt goes in; Stop when the
model has answered; PreCompact/PostCompact around a compaction; SessionEnd when the
session closes. Tool events fire in the tool pipeline (``codemode.hooks.tool_calls``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from codemode.agent.events import HookRunItem, ItemCompleted, ItemStarted, Notice
from codemode.hooks.engine import Combined, HookEngine, HookRun

Emit = Callable[[BaseModel], None]


class SessionHooks:
    """The lifecycle events of one session's hooks, and their runs as items."""

    def __init__(self, engine: HookEngine, emit: Emit, next_id: Callable[[], str]) -> None:
        self.engine = engine
        self._emit = emit
        self._next_id = next_id
        self._items: dict[str, HookRunItem] = {}
        engine.listeners.append(self._on_run)
        self.started = False

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
        """SessionStart; the context its hooks add for the model."""
        self.started = True
        answer = await self._fire("SessionStart", {"source": source}, (source,))
        return answer.context

    async def prompt_submit(self, prompt: str) -> Combined:
        return await self._fire("UserPromptSubmit", {"prompt": prompt})

    async def stop(self, last_message: str, active: bool) -> Combined:
        return await self._fire(
            "Stop", {"stop_hook_active": active, "last_assistant_message": last_message}
        )

    async def compact(self, when: str, trigger: str) -> None:
        """PreCompact or PostCompact (``when``); trigger: manual or auto."""
        await self._fire(when, {"trigger": trigger}, (trigger,))

    async def session_end(self, reason: str) -> None:
        await self._fire("SessionEnd", {"reason": reason}, (reason,))

    async def _fire(
        self, event: str, fields: dict[str, Any], subjects: tuple[str, ...] = ()
    ) -> Combined:
        if not self.engine.has(event):
            return Combined()
        answer = await self.engine.fire(event, fields, subjects)
        if answer.stop and self.engine.stop_request is None:
            self.engine.stop_request = answer.stop_reason or f"a {event} hook asked to stop"
        return answer

    def take_context(self) -> list[str]:
        """Context hooks added outside a program since the last request."""
        pending, self.engine.pending_context = self.engine.pending_context, []
        return pending
