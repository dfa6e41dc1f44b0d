"""The turn loop: model -> actions -> results -> model, until the model answers.

A ``Session`` owns the conversation, a provider, a harness and a tool runner. It
reports everything through one ``emit`` callback; the terminal printer, ``--json``
and the session file all listen to that same stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from codemode.agent.call_order import run_in_order
from codemode.agent.compaction import compact_tool_results, request_units
from codemode.agent.context_window import ContextBudget
from codemode.agent.cutoff import cutoff_note, settle_reply, valid_history
from codemode.agent.events import (
    AgentMessageItem,
    ItemCompleted,
    Notice,
    TurnCompleted,
    TurnError,
    TurnFailed,
    TurnStarted,
    TurnUsage,
    is_public,
)
from codemode.agent.fitting import send_within_window, shorten_with_hooks
from codemode.agent.lifecycle import SessionHooks
from codemode.agent.reply_stream import stream_reply
from codemode.agent.rollout import Rollout, close_dangling_calls
from codemode.agent.runner import ToolRunner
from codemode.agent.strikes import Strikes
from codemode.agent.turn_result import StopReason, TurnFailure, TurnResult
from codemode.harnesses.base import Harness
from codemode.providers.base import (
    AssistantMessage,
    ImageInput,
    Message,
    ModelRequest,
    Provider,
    ProviderError,
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

Listener = Callable[[BaseModel], None]


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
            transcript = rollout.path if rollout is not None else None
            self.hooks = SessionHooks.attach(hooks, self.emit, runner.next_id, session_id,
                                             model, transcript)
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
        if self.hooks is not None:
            self.hooks.begin_turn()
        try:
            before, after = (
                await self.hooks.prompt_context(prompt, self.start_source, self.model)
                if self.hooks else ([], [])
            )
            for text in before:
                self._append(UserMessage(text=text))
            self._append(UserMessage(text=prompt, images=images or []), prompt=True)
            for text in after:
                self._append(UserMessage(text=text))
            await self._loop(result)
        except asyncio.CancelledError:
            self._fail(result, "interrupted", "cancelled")
            if self.hooks is not None:
                await self.hooks.interrupted(self.rollout.sync if self.rollout else None)
            raise
        except TurnFailure as exc:
            self._fail(result, str(exc), exc.reason)
        except ProviderError as exc:
            self._fail(result, str(exc), "provider_error")
        else:
            result.ok, result.stop_reason = True, "completed"
            self.emit(TurnCompleted(usage=TurnUsage.of(result.usage),
                                    total_usage=TurnUsage.of(self.total_usage),
                                    model_requests=result.model_requests))  # fmt: skip
        finally:
            if self.rollout is not None:
                self.rollout.sync()
            if self.hooks is not None:
                self.hooks.end_turn()
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
        strikes = Strikes()
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
                self._append(UserMessage(text=strikes.remind(actions.reminder)))
                continue
            strikes.reminders = 0
            if actions.final_answer is not None:
                if await self._stop_blocked(actions.final_answer):
                    continue
                self._finish_with(result, actions.final_answer)
                return
            if not actions.calls:
                problem = self.final_check(message.text) if self.final_check else None
                if problem is not None:
                    self._append(UserMessage(text=strikes.reject(problem)))
                    continue
                if await self._stop_blocked(message.text):
                    continue
                result.final_message = message.text
                return
            outcomes = await run_in_order(actions.calls, self._execute, self._reads_only)
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

    def _reads_only(self, call: ToolCall) -> bool:
        tool = self.runner.registry.get(call.name)
        return tool is not None and tool.effect == "read"

    async def _execute(self, call: ToolCall) -> Outcome:
        # Hooks name the model's call that a tool call (a program's too) belongs to.
        current_model_call.set(call.id)  # (this task's own context: gather made it)
        return await self.harness.execute(call, self.runner)

    # --- hooks (codemode.agent.lifecycle) ----------------------------------------------

    async def _stop_blocked(self, answer: str) -> bool:
        """Stop hooks: True when one refused to let the turn end (its reason is now the
        model's next message)."""
        after = await self.hooks.stop_context(answer) if self.hooks is not None else []
        for text in after:
            self._append(UserMessage(text=text))
        return bool(after)

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
        """One model request, streamed, made to fit the context window
        (``codemode.agent.fitting``)."""
        self.context.max_output_tokens = self.sampling.max_output_tokens
        return await send_within_window(
            self.context,
            self._stream_once,
            self._request_units,
            lambda: request_units(self.instructions, self._tool_specs, []),
            self._shorten,
            self.harness.name,
        )

    def _request_units(self) -> int:
        return request_units(self.instructions, self._tool_specs, self.messages)

    async def _shorten(self, over_tokens: int, state: str, retrying: bool = False) -> bool:
        """Shorten the conversation by ``over_tokens`` (``shorten_with_hooks``); says
        whether anything changed."""
        done, context = await shorten_with_hooks(
            self.messages, self._turn_start, over_tokens, self.context, self.hooks,
            self.emit, state, retrying,
        )
        self._turn_start = done.turn_start
        for text in context:
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
        if self.hooks is not None:
            await self.hooks.before_request()
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
        return await stream_reply(
            self.provider, request, self.retry_policy, self.emit, self.runner.next_id
        )

