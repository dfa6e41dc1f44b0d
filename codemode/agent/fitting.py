"""Keeping a session's requests within its model's context window.

Before a request that would not fit (the window known), the conversation is shortened
(``codemode.agent.compaction.shorten``); a request the server refuses as too long is
shortened to the size the error reports and sent once more. Shortening runs the
PreCompact and PostCompact hooks (trigger: auto) around it and SessionStart (compact)
after, as a manual compaction does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from codemode.agent.compaction import Shortened, shorten
from codemode.agent.context_window import ContextBudget, does_not_fit_first, still_too_long
from codemode.agent.events import Notice
from codemode.agent.lifecycle import SessionHooks
from codemode.agent.turn_result import TurnFailure
from codemode.providers.base import AssistantMessage, ContextOverflowError, Message, Usage

# A model's reply, its usage and its stop reason.
Reply = tuple[AssistantMessage, Usage, str]


async def send_within_window(
    budget: ContextBudget,
    send: Callable[[], Awaitable[Reply]],
    units: Callable[[], int],
    fixed_units: Callable[[], int],
    shorten: Callable[[int, str, bool], Awaitable[bool]],
    harness: str,
) -> Reply:
    """``send()`` a request of ``units()`` estimated units (``fixed_units()`` of them the
    instructions and tool definitions), shortening the conversation with
    ``shorten(over_tokens, state, retrying)`` first when ``budget`` says it would not
    fit, and once more on an overflow. A conversation that still does not fit ends the
    turn (``TurnFailure``)."""
    target = budget.limit()
    sent_units = units()
    if target is not None and budget.tokens(sent_units) > target:
        await shorten(budget.tokens(sent_units) - target, "nearly full", False)
        sent_units = units()
    try:
        reply = await send()
    except ContextOverflowError as exc:
        sent = budget.refused(exc, sent_units)
        target = budget.target()
        fixed = budget.tokens(fixed_units())
        # There is one retry: aim a tenth under the target. Without a size to fit, or
        # when the estimate said it fits (the server counts differently), a third goes.
        over = sent - int(target * 0.9) if target is not None else 0
        over = over if over > 0 else sent // 3
        if not await shorten(over, "full", True):
            # The first request of a session, or nothing but instructions and prompt.
            raise TurnFailure(does_not_fit_first(budget, sent, fixed, harness),
                              "context_full") from None
        sent_units = units()
        try:
            reply = await send()
        except ContextOverflowError as again:
            raise TurnFailure(still_too_long(budget, again.prompt_tokens),
                              "context_full") from None
    budget.accepted(sent_units, reply[1].input_tokens)
    return reply


async def shorten_with_hooks(
    messages: list[Message],
    turn_start: int,
    over_tokens: int,
    budget: ContextBudget,
    hooks: SessionHooks | None,
    emit: Callable[[BaseModel], None],
    state: str,
    retrying: bool,
) -> tuple[Shortened, list[str]]:
    """Shorten ``messages`` by ``over_tokens`` in place, the compaction hooks (trigger:
    auto) around it, a notice saying what was cut (the window ``state``: nearly full,
    full); what was done, and the messages SessionStart (compact) adds for the model."""
    excess = max(1, int(over_tokens / budget.scale) + 1)
    if hooks is not None:
        await hooks.compact("PreCompact", "auto")
    done = shorten(messages, turn_start, excess)
    added: list[str] = []
    if done.changed:
        window = f" ({budget.window:,} tokens)" if budget.window else ""
        again = ", retrying" if retrying else ""
        emit(Notice(message=f"context window {state}{window}: {done.describe()}{again}"))
        if hooks is not None:
            await hooks.compact("PostCompact", "auto")
            added = await hooks.session_start("compact")
    return done, added
