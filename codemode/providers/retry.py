"""Sending a model request again when it failed in a way that may pass: rate limits,
5xx, connection faults, timeouts, streams cut midway.

A 500 that comes back word for word is taken as the answer to this request and not
sent a third time. Tools run only after ``Completed``, so a stream cut before it has
run nothing; the consumer is told with ``StreamRestarted`` to drop the partial deltas
it has shown.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing

from pydantic import BaseModel, Field

from codemode.providers.base import (
    ModelRequest,
    Provider,
    ProviderError,
    StreamEvent,
    StreamRestarted,
)


class RetryPolicy(BaseModel):
    """How often and how long to wait. Delays grow exponentially with full jitter
    (a random wait between 0 and the cap), unless the service said how long to wait."""

    # Attempts in all; with max_stream_retries set, attempts that failed before any of
    # the answer came (Codex's request_max_retries + 1).
    max_attempts: int = Field(default=5, ge=1)
    # Restarts after a stream broke midway, counted apart (Codex's stream_max_retries);
    # None: those count against max_attempts like any other failure.
    max_stream_retries: int | None = Field(default=None, ge=0)
    base_delay_s: float = Field(default=0.5, ge=0)
    max_delay_s: float = Field(default=30.0, ge=0)
    # A Retry-After longer than this is cut down to it, so a session never sleeps for
    # an hour on one header.
    max_retry_after_s: float = Field(default=120.0, ge=0)

    def delay(self, attempt: int, error: ProviderError) -> float:
        """The wait before attempt ``attempt + 1`` after ``error`` ended attempt ``attempt``."""
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after_s)
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return random.uniform(0, cap)


Sleep = Callable[[float], Awaitable[object]]


async def stream_with_retries(
    provider: Provider,
    request: ModelRequest,
    policy: RetryPolicy | None = None,
    *,
    sleep: Sleep = asyncio.sleep,
) -> AsyncGenerator[StreamEvent, None]:
    """``provider.stream(request)``, sent again on retryable errors.

    ``policy`` defaults to the provider's own (``provider.retry_policy``, from its
    config table), else ``RetryPolicy()``. Yields ``StreamRestarted(attempt, delay_s,
    reason)`` before each new attempt (``attempt`` is the number of the attempt about to
    start). Raises the last error when it is not retryable or the attempts are used up.
    """
    policy = policy or getattr(provider, "retry_policy", None) or RetryPolicy()
    attempt = 1
    request_failures = stream_failures = 0
    previous: str | None = None
    while True:
        began = False
        try:
            # Closed at once on a break or a failure, so its connection goes back now.
            async with aclosing(provider.stream(request)) as events:
                async for event in events:
                    began = True
                    yield event
            return
        except ProviderError as error:
            if not error.retryable:
                raise
            # A server error that comes back word for word is an answer to this request,
            # not a passing fault: the same request would get it a third time.
            said = f"{error.status}:{error}"
            if error.status == 500 and said == previous:
                error.add_note(f"the server gave the same answer {attempt} times; not retrying")
                raise
            previous = said
            if began:
                stream_failures += 1
            else:
                request_failures += 1
            stream_cap = policy.max_stream_retries
            if (request_failures >= policy.max_attempts
                    or (stream_cap is not None and stream_failures > stream_cap)
                    or (stream_cap is None and attempt >= policy.max_attempts)):
                error.add_note(f"gave up after {attempt} attempts")
                raise
            delay = policy.delay(attempt, error)
            attempt += 1
            yield StreamRestarted(attempt=attempt, delay_s=delay, reason=str(error))
            await sleep(delay)
