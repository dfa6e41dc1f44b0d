"""One repository's agent session (``interpreter exec --repos ... PROMPT``).

The session is built as ``exec`` builds one (the configured provider, harness and
dialect, code mode by default) with the repository's copy as its workspace, runs the
prompt as one turn without a human (a command that needs approval is refused), and
its outcome becomes the repository's result: ok when the turn completed, failed
otherwise, with the model requests, tokens and (given a price) cost it took. The
per-repository token budget is checked after every model response; once it is spent
the turn is cancelled, which fails the repository (its changes are then dropped like
any failed run's).

Unlike a ``run`` batch (``programs.py``), each repository's session has an engine worker
of its own: an agent's code session is persistent (what the model's programs leave on
``globalThis`` is there for its next program), so handing that worker to the next
repository would first need the runtime to drop the isolate it holds. What it would
save is small: the runtime's pool boots the next worker while this repository's turn
runs (off its wall clock), about 50 ms of CPU per repository beside the turn's own.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from codemode.batch.models import ERROR_CHARS, VALUE_CHARS, AgentTask, RepoResult


class _Budget:
    """A session listener that cancels the turn once the session's tokens pass the budget."""

    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.session: Any = None
        self.turn: asyncio.Task[Any] | None = None
        self.spent_at: int | None = None
        self.tool_calls = 0

    def __call__(self, event: object) -> None:
        item = getattr(event, "item", None)
        if getattr(event, "type", None) == "item.completed" and type(item).__name__ not in (
            "AgentMessageItem", "ReasoningItem", "ErrorItem", "TodoListItem"
        ):
            self.tool_calls += 1
        if self.budget is None or self.session is None or self.turn is None:
            return
        used = self.session.total_usage.total_tokens
        if used > self.budget and self.spent_at is None:
            self.spent_at = used
            self.turn.cancel()


async def run_agent(
    agent: AgentTask, repository: str, work: Path, started: float
) -> RepoResult:
    """Run ``agent``'s prompt in ``work``; the result is named after ``repository``."""
    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session
    from codemode.config import load_config

    options = SessionOptions(cwd=work, **agent.options)
    config = load_config(options.overrides)
    if options.code_mode is None and "code_mode" not in config.model_fields_set:
        options.code_mode = True  # code mode unless --classic or the config says otherwise
    budget = _Budget(agent.token_budget)
    session = build_session(config, options, SessionSpec(listeners=[budget]))
    budget.session = session
    turn = asyncio.ensure_future(session.run_turn(agent.prompt))
    budget.turn = turn
    error: str | None = None
    kind: Any = None
    value: str | None = None
    try:
        result = await turn
        if result.ok:
            value = result.final_message[:VALUE_CHARS]
        else:
            error, kind = (result.error or "the turn failed")[:ERROR_CHARS], "agent"
    except asyncio.CancelledError:
        if budget.spent_at is None:
            raise  # stopped from outside (Ctrl-C): not this repository's failure
        error = f"token budget spent: {budget.spent_at} tokens used, {agent.token_budget} allowed"
        kind = "budget"
    finally:
        await session.aclose()
    usage = session.total_usage
    last = getattr(session, "last_result", None)
    requests = last.model_requests if last is not None else 0
    outcome = RepoResult(
        repository=repository,
        status="ok" if error is None else "failed",
        duration_s=round(time.perf_counter() - started, 4),
        tool_calls=budget.tool_calls,
        error=error,
        error_kind=kind,
        value=value,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        model_requests=requests,
    )
    if agent.price is not None:
        per_input, per_output = agent.price
        cost = usage.input_tokens * per_input + usage.output_tokens * per_output
        outcome.cost_usd = round(cost / 1_000_000, 6)
    return outcome
