"""The turn loop: model -> actions -> results -> model, until the model answers.

A ``Session`` owns the conversation, a provider, a harness and a tool runner. It
reports everything through one ``emit`` callback; the terminal printer, ``--json``
and the session file all listen to that same stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from codemode.agent.compaction import compact_tool_results, request_units, shorten
from codemode.agent.context_window import ContextBudget, does_not_fit_first, still_too_long
from codemode.agent.cutoff import cutoff_note, settle_reply, valid_history
from codemode.agent.events import (
    AgentMessageItem,
    ItemCompleted,
    Notice,
    ReasoningDeltaEvent,
    ReasoningItem,
    TextDeltaEvent,
    TurnCompleted,
    TurnError,
    TurnFailed,
    TurnStarted,
    TurnUsage,
    is_public,
)
from codemode.agent.lifecycle import SessionHooks
from codemode.agent.rollout import Rollout, close_dangling_calls
from codemode.agent.runner import ToolRunner
from codemode.harnesses.base import Harness
from codemode.providers.base import (
    AssistantMessage,
    Completed,
    ContextOverflowError,
    ImageInput,
    Message,
    ModelRequest,
    Provider,
    ProviderError,
    ReasoningDelta,
    StreamRestarted,
    TextDelta,
    ToolSpec,
    Usage,
    UserMessage,
)
from codemode.providers.sampling import Sampling
from codemode.tools.provenance import current_model_call

if TYPE_CHECKING:
    from codemode.harnesses.base import Outcome
    from codemode.hooks.engine import HookEngine
    from codemode.providers.base import ToolCall
    from codemode.providers.catalog import ModelFacts

# Consecutive replies with neither an action nor an answer before the turn gives up.
MAX_FORMAT_REMINDERS = 3

Listener = Callable[[BaseModel], None]

# Why a turn ended. completed: the model gave its final answer; max_turns: it used up
# its model requests; cancelled: interrupted; no_action: it kept replying with neither
# an action nor an answer; answer_rejected: its final answer failed the output check
# twice; context_full: the conversation no longer fits even after compaction;
# provider_error: the model service failed; prompt_blocked: a UserPromptSubmit hook
# refused the prompt; hook_stopped: a hook said ``continue: false``; error: anything
# else (a broken stream).
StopReason = Literal[
    "completed",
    "max_turns",
    "cancelled",
    "no_action",
    "answer_rejected",
    "context_full",
    "provider_error",
    "prompt_blocked",
    "hook_stopped",
    "error",
]


@dataclass
class TurnResult:
    ok: bool
    final_message: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    model_requests: int = 0
    # Set by the loop whenever a turn ends: callers branch on this, never on ``error``.
    stop_reason: StopReason = "error"


class TurnFailure(Exception):
    """Ends a turn with a message for the user, and why it stopped."""

    def __init__(self, message: str, reason: StopReason = "error") -> None:
        super().__init__(message)
        self.reason: StopReason = reason


class Session:
    """One conversation with a model, driving tools through a harness."""

    def __init__(
        self,
        *,
        session_id: str,
        provider: Provider,
        model: str,
        harness: Harness,
        runner: ToolRunner,
        instructions: str,
        rollout: Rollout | None = None,
        messages: list[Message] | None = None,
        max_turns: int = 50,
        reasoning_effort: str | None = None,
        retry_policy: object | None = None,
        sampling: Sampling | None = None,
        model_facts: ModelFacts | None = None,
        listeners: list[Listener] | None = None,
        final_check: Callable[[str], str | None] | None = None,
        output_schema: dict[str, Any] | None = None,
        hooks: HookEngine | None = None,
        start_source: str = "startup",
    ) -> None:
        self.id = session_id
        self.provider = provider
        self.model = model
        self.runner = runner
        self.instructions = instructions
        self.rollout = rollout
        self.messages: list[Message] = list(messages or [])
        self.max_turns = max_turns
        self.reasoning_effort = reasoning_effort
        self.retry_policy = retry_policy
        self.sampling = sampling or Sampling()
        # What the provider catalog knows about the model (None: nothing), and its
        # context window, also learnt from an overflow error: the conversation is
        # shortened before a request would not fit (codemode.agent.compaction).
        self.model_facts = model_facts
        self.context = ContextBudget(
            window=model_facts.context_window if model_facts is not None else None
        )
        self._turn_start = 0  # index of the current turn's first message
        self.total_usage = Usage()
        self.listeners: list[Listener] = list(listeners or [])
        # Checks a final answer: None when it is acceptable, else what is wrong with it
        # (exec --output-schema). The first problem is sent back to the model, a second
        # fails the turn.
        self.final_check = final_check
        # Sent to wires that enforce it (ModelRequest.output_schema).
        self.output_schema = output_schema
        # The last turn's result, also when it was cancelled (run_turn then raises).
        self.last_result: TurnResult | None = None
        self._closed = False
        # The user's hooks (codemode.hooks), and SessionStart's source for the first turn.
        self.hooks: SessionHooks | None = None
        self.start_source = start_source
        if hooks is not None:
            self.hooks = SessionHooks(hooks, self.emit, runner.next_id)
            hooks.facts.session_id, hooks.facts.model = session_id, model
            if rollout is not None:
                hooks.facts.transcript_path = str(rollout.path)
        self.set_harness(harness)
        self.messages = valid_history(self.messages, self._tool_specs)

    def set_harness(self, harness: Harness, instructions: str | None = None) -> None:
        """Use ``harness`` from the next model request on (with its ``instructions``)."""
        self.harness = harness
        self._tool_specs: list[ToolSpec] = harness.tool_specs(self.runner.registry)
        if instructions is not None:
            self.instructions = instructions

    async def use_model(self, model: str | None, provider: Provider | None = None) -> None:
        """Talk to ``model`` (and ``provider``, closing the old one) from the next request."""
        if provider is not None and provider is not self.provider:
            old, self.provider = self.provider, provider
            await old.aclose()
        if model:
            self.model = model

    def set_permissions(self, sandbox_mode: str, approval_policy: str) -> None:
        """Change the sandbox mode and approval policy from the next command on."""
        from codemode.sandbox.session import SandboxSession

        context = self.runner.context
        old = context.sandbox
        if not isinstance(old, SandboxSession):
            return  # an unconfined context has no modes to change
        settings = old.settings.model_copy(
            update={"sandbox_mode": sandbox_mode, "approval_policy": approval_policy}
        )
        # Rules are read again on first use, "always" answers included (they are
        # saved in the rules file).
        context.sandbox = SandboxSession(old.workspace, settings, approver=old.approver)
        old.close()

    async def aclose(self, reason: str = "other") -> None:
        """End the session: its SessionEnd hooks (``reason``: clear, logout,
        prompt_input_exit, other), then stop its engine worker and running programs, its
        MCP servers and sandbox session, close its session file and the provider's
        connections. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.hooks is not None and self.hooks.started:
                await self.hooks.session_end(reason)
        finally:
            await self._release()

    async def _release(self) -> None:
        try:
            await self.runner.aclose()  # cells, engine worker, sandbox session, MCP servers
        finally:
            try:
                if self.rollout is not None:
                    self.rollout.close()
            finally:
                await self.provider.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- events ----------------------------------------------------------------------

    def emit(self, event: BaseModel) -> None:
        if self.rollout is not None and is_public(event):
            self.rollout.record_event(event)
        for listener in self.listeners:
            listener(event)

    def _append(self, message: Message, usage: Usage | None = None, prompt: bool = False) -> None:
        self.messages.append(message)
        if self.rollout is not None:
            self.rollout.record_message(message, usage, prompt=prompt)

    # --- the turn --------------------------------------------------------------------

    async def run_turn(self, prompt: str, images: list[ImageInput] | None = None) -> TurnResult:
        """Run one user turn to its end; never raises for model or tool failures
        (the result says what went wrong). Cancellation propagates after the turn is
        recorded as failed."""
        self.emit(TurnStarted())
        self._turn_start = len(self.messages)
        result = TurnResult(ok=False)
        self.last_result = result
        try:
            before, after = await self._prompt_hooks(prompt) if self.hooks else ([], [])
            for text in before:
                self._append(UserMessage(text=text))
            self._append(UserMessage(text=prompt, images=images or []), prompt=True)
            for text in after:
                self._append(UserMessage(text=text))
            await self._loop(result)
        except asyncio.CancelledError:
            self._fail(result, "interrupted", "cancelled")
            raise
        except TurnFailure as exc:
            self._fail(result, str(exc), exc.reason)
        except ProviderError as exc:
            self._fail(result, str(exc), "provider_error")
        else:
            result.ok, result.stop_reason = True, "completed"
            self.emit(
                TurnCompleted(
                    usage=TurnUsage.of(result.usage),
                    total_usage=TurnUsage.of(self.total_usage),
                    model_requests=result.model_requests,
                )
            )
        finally:
            if self.rollout is not None:
                self.rollout.sync()
        return result

    def _fail(self, result: TurnResult, message: str, reason: StopReason) -> None:
        # Calls left without results (an interrupted tool) get one, so the next turn's
        # conversation is well formed.
        repaired = close_dangling_calls(self.messages)
        for added in repaired[len(self.messages) :]:
            self._append(added)
        result.ok, result.error, result.stop_reason = False, message, reason
        self.emit(TurnFailed(error=TurnError(message=message)))

    async def _loop(self, result: TurnResult) -> None:
        reminders = 0
        checks_failed = 0
        for _ in range(self.max_turns):
            message, usage, stop_reason = await self._sample()
            result.model_requests += 1
            result.usage += usage
            self.total_usage += usage
            # A call cut off by the output limit is not run, and no call goes into the
            # history with arguments its server could not parse (codemode.agent.cutoff).
            settled = settle_reply(message, stop_reason, self._tool_specs)
            self._append(settled.history, usage)
            actions = self.harness.actions(settled.run)
            cut_note = None
            if settled.dropped:
                cut_note = cutoff_note(settled.dropped, self.sampling.max_output_tokens)
                self.emit(Notice(message="the model's tool call was cut off by the "
                                 "output-token limit; it was not run"))
                if not actions.calls and actions.final_answer is None:
                    # Nothing else to do in this reply: the note is the reminder.
                    actions.reminder = cut_note
            if actions.reminder is not None:
                reminders += 1
                if reminders >= MAX_FORMAT_REMINDERS:
                    raise TurnFailure(
                        f"the model replied {reminders} times in a row without a valid "
                        "action or a final answer; stopping",
                        "no_action",
                    )
                self._append(UserMessage(text=actions.reminder))
                continue
            reminders = 0
            if actions.final_answer is not None:
                if await self._stop_blocked(actions.final_answer):
                    continue
                self._finish_with(result, actions.final_answer)
                return
            if not actions.calls:
                problem = self.final_check(message.text) if self.final_check else None
                if problem is not None:
                    checks_failed += 1
                    if checks_failed > 1:
                        raise TurnFailure(
                            f"the final answer was not accepted, even after a retry: {problem}",
                            "answer_rejected",
                        )
                    self._append(
                        UserMessage(
                            text=f"Your final answer was not accepted: {problem}. "
                            "Reply again with a corrected final answer."
                        )
                    )
                    continue
                if await self._stop_blocked(message.text):
                    continue
                result.final_message = message.text
                return
            outcomes = await asyncio.gather(*(self._execute(call) for call in actions.calls))
            for reply in self.harness.result_messages(actions.calls, list(outcomes)):
                self._append(reply)
            if self.hooks is not None:
                self._after_calls(self.hooks)
            if cut_note is not None:
                self._append(UserMessage(text=cut_note))
            done = [o.final_answer for o in outcomes if o.final_answer is not None]
            if done:
                self._finish_with(result, done[0])
                return
        raise TurnFailure(
            f"stopped after {self.max_turns} model requests without a final answer "
            "(raise --max-turns to allow more)",
            "max_turns",
        )

    async def _execute(self, call: ToolCall) -> Outcome:
        # Hooks name the model's call that a tool call (a program's too) belongs to.
        current_model_call.set(call.id)  # (this task's own context: gather made it)
        return await self.harness.execute(call, self.runner)

    # --- hooks (codemode.agent.lifecycle) ----------------------------------------------

    async def _prompt_hooks(self, prompt: str) -> tuple[list[str], list[str]]:
        """SessionStart (once) and UserPromptSubmit: the messages their hooks add before
        and after the prompt. TurnFailure when a hook refuses the prompt or stops."""
        assert self.hooks is not None
        self.hooks.engine.facts.model = self.model
        verdict = await self.hooks.before_prompt(prompt, self.start_source)
        if verdict.refusal is not None:
            raise TurnFailure(*verdict.refusal)
        return verdict.before, verdict.after

    async def _stop_blocked(self, answer: str) -> bool:
        """Stop hooks: True when one refused to let the turn end (its reason is now the
        model's next message)."""
        if self.hooks is None:
            return False
        verdict = await self.hooks.stop_check(answer)
        if verdict.refusal is not None:
            raise TurnFailure(*verdict.refusal)
        for text in verdict.after:
            self._append(UserMessage(text=text))
        return bool(verdict.after)

    def _after_calls(self, hooks: SessionHooks) -> None:
        verdict = hooks.after_calls()
        for text in verdict.after:
            self._append(UserMessage(text=text))
        if verdict.refusal is not None:
            raise TurnFailure(*verdict.refusal)

    def _finish_with(self, result: TurnResult, answer: str) -> None:
        """End the turn on a harness's completion signal, with ``answer`` as the reply."""
        result.final_message = answer
        self.emit(ItemCompleted(item=AgentMessageItem(id=self.runner.next_id(), text=answer)))

    async def _sample(self) -> tuple[AssistantMessage, Usage, str]:
        """One model request, streamed. With a known context window the conversation is
        shortened first when the request would not fit; on an overflow it is shortened
        to the size the error reports and sent once more."""
        budget = self.context
        budget.max_output_tokens = self.sampling.max_output_tokens
        target = budget.limit()
        units = self._request_units()
        if target is not None and budget.tokens(units) > target:
            await self._shorten(budget.tokens(units) - target, "nearly full")
            units = self._request_units()
        try:
            message, usage, stop = await self._stream_once()
        except ContextOverflowError as exc:
            sent = budget.refused(exc, units)
            target = budget.target()
            fixed = budget.tokens(request_units(self.instructions, self._tool_specs, []))
            # There is one retry: aim a tenth under the target. Without a size to fit, or
            # when the estimate said it fits (the server counts differently), a third goes.
            over = sent - int(target * 0.9) if target is not None else 0
            over = over if over > 0 else sent // 3
            if not await self._shorten(over, "full", retrying=True):
                # The first request of a session, or nothing but instructions and prompt.
                raise TurnFailure(does_not_fit_first(budget, sent, fixed, self.harness.name),
                                  "context_full") from None
            units = self._request_units()
            try:
                message, usage, stop = await self._stream_once()
            except ContextOverflowError as again:
                raise TurnFailure(still_too_long(budget, again.prompt_tokens),
                                  "context_full") from None
        budget.accepted(units, usage.input_tokens)
        return message, usage, stop

    def _request_units(self) -> int:
        return request_units(self.instructions, self._tool_specs, self.messages)

    async def _shorten(self, over_tokens: int, state: str, retrying: bool = False) -> bool:
        """Shorten the conversation by ``over_tokens``, with the PreCompact and
        PostCompact hooks (trigger: auto) around it and SessionStart (compact) after;
        says whether anything changed."""
        budget = self.context
        excess = max(1, int(over_tokens / budget.scale) + 1)
        hooks = self.hooks
        if hooks is not None:
            await hooks.compact("PreCompact", "auto")
        done = shorten(self.messages, self._turn_start, excess)
        self._turn_start = done.turn_start
        if done.changed:
            window = f" ({budget.window:,} tokens)" if budget.window else ""
            again = ", retrying" if retrying else ""
            self.emit(Notice(message=f"context window {state}{window}: {done.describe()}{again}"))
            if hooks is not None:
                await hooks.compact("PostCompact", "auto")
                for text in await hooks.session_start("compact"):
                    self._append(UserMessage(text=text))
        return done.changed

    async def compact(self, trigger: str = "manual", keep: int = 1) -> int:
        """Cut old tool outputs (``compact_tool_results``, keeping the last ``keep``; the
        interactive ``/compact``), with the PreCompact and
        PostCompact hooks (``trigger``: auto or manual) around it and SessionStart
        (compact) after; how many were cut."""
        hooks = self.hooks
        if hooks is not None:
            await hooks.compact("PreCompact", trigger)
        cut = compact_tool_results(self.messages, keep)
        if hooks is not None and cut:
            await hooks.compact("PostCompact", trigger)
            for text in await hooks.session_start("compact"):
                self._append(UserMessage(text=text))
        return cut

    async def _stream_once(self) -> tuple[AssistantMessage, Usage, str]:
        from codemode.providers.retry import stream_with_retries

        request = ModelRequest(
            model=self.model,
            instructions=self.instructions,
            messages=self.messages,
            tools=self._tool_specs,
            reasoning_effort=self.reasoning_effort,
            output_schema=self.output_schema,
            max_output_tokens=self.sampling.max_output_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            seed=self.sampling.seed,
        )
        text_id: str | None = None
        reasoning_id: str | None = None
        async for event in stream_with_retries(self.provider, request, self.retry_policy):
            if isinstance(event, TextDelta):
                text_id = text_id or self.runner.next_id()
                self.emit(TextDeltaEvent(item_id=text_id, text=event.text))
            elif isinstance(event, ReasoningDelta):
                reasoning_id = reasoning_id or self.runner.next_id()
                self.emit(ReasoningDeltaEvent(item_id=reasoning_id, text=event.text))
            elif isinstance(event, StreamRestarted):
                self.emit(
                    Notice(
                        message=f"model request failed ({event.reason}); retrying in "
                        f"{event.delay_s:.1f}s (attempt {event.attempt})"
                    )
                )
            elif isinstance(event, Completed):
                message = event.message
                if message.reasoning:
                    item_id = reasoning_id or self.runner.next_id()
                    self.emit(ItemCompleted(item=ReasoningItem(id=item_id, text=message.reasoning)))
                if message.text:
                    item_id = text_id or self.runner.next_id()
                    self.emit(ItemCompleted(item=AgentMessageItem(id=item_id, text=message.text)))
                if event.stop_reason == "length" and not message.tool_calls:
                    self.emit(Notice(message="the reply was cut off by the output-token "
                                     "limit (max_output_tokens)"))
                return message, event.usage, event.stop_reason
        raise TurnFailure("the model stream ended without a complete reply")

