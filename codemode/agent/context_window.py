"""What a session knows about its model's context window, and what to tell the user
when a conversation does not fit.

The window comes from the provider catalog, or from the first overflow error that names
it (llama.cpp's ``n_ctx``, vLLM's "maximum context length", ...). Without either, the
largest request the server accepted is a window it surely has. Each request's real size
calibrates the estimate (``codemode.agent.compaction``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codemode.agent.compaction import DEFAULT_RESERVE, MARGIN
from codemode.providers.base import ContextOverflowError

# Tokens per estimated unit are kept within this range (a usage report of 0, or a
# server that counts oddly, must not make every request look empty or enormous).
MIN_SCALE, MAX_SCALE = 0.1, 4.0
# What must have been added since the last measured request to measure its cost anew.
MIN_ADDED_UNITS = 200


@dataclass
class ContextBudget:
    """The window (tokens; None: unknown) and the estimate's calibration.

    A request's size is estimated from the last one whose real size is known (the
    anchor), plus what changed since, at the tokens per unit measured for what was
    added: prose and code cost about a token per unit on any tokenizer, but digits or
    repeated text can cost far less, and a single average over the whole request would
    cut too little of them.
    """

    window: int | None = None
    max_output_tokens: int | None = None
    anchor_units: int = 0  # the last request of known size: its units and tokens
    anchor_tokens: int = 0
    scale: float = 1.0  # tokens per unit of what changed since the anchor
    largest_fit: int = 0  # the most input tokens a request of this session was accepted with
    requests: int = 0  # requests the server accepted

    def tokens(self, units: int) -> int:
        if not self.anchor_tokens:
            return math.ceil(units * self.scale)
        return max(1, math.ceil(self.anchor_tokens + (units - self.anchor_units) * self.scale))

    def reserve(self, window: int) -> int:
        """Room kept for the answer."""
        if self.max_output_tokens:
            return min(self.max_output_tokens, window // 2)
        return min(DEFAULT_RESERVE, window // 8)

    def limit(self) -> int | None:
        """The most input tokens a request should have (None: no window known)."""
        if self.window is None:
            return None
        return max(1, self.window - self.reserve(self.window) - int(self.window * MARGIN))

    def accepted(self, units: int, input_tokens: int) -> None:
        """A request of ``units`` went through, with ``input_tokens`` (0: not reported)."""
        self.requests += 1
        if input_tokens > 0 and units > 0:
            self._measured(units, input_tokens)
            self.largest_fit = max(self.largest_fit, input_tokens)

    def refused(self, exc: ContextOverflowError, units: int) -> int:
        """Learn from an overflow of a request of ``units``; returns its size in tokens."""
        if exc.context_window:
            self.window = exc.context_window
        prompt = exc.prompt_tokens
        if prompt is None and exc.excess_tokens and self.window:
            prompt = self.window + exc.excess_tokens
        if prompt and units > 0:
            self._measured(units, prompt)
        return prompt or self.tokens(units)

    def _measured(self, units: int, tokens: int) -> None:
        added = units - self.anchor_units
        if not self.anchor_tokens:
            self.scale = _clamp(tokens / units)
        elif added >= MIN_ADDED_UNITS:
            self.scale = _clamp((tokens - self.anchor_tokens) / added)
        self.anchor_units, self.anchor_tokens = units, tokens

    def target(self) -> int | None:
        """The size the next request must come under: the window less the answer's room,
        else the largest request that was accepted, else unknown."""
        limit = self.limit()
        if limit is not None:
            return limit
        return self.largest_fit or None


def _clamp(scale: float) -> float:
    return min(MAX_SCALE, max(MIN_SCALE, scale))


def does_not_fit_first(budget: ContextBudget, prompt_tokens: int, fixed_tokens: int,
                       harness: str) -> str:
    """The message for a first request (nothing to shorten) that does not fit."""
    window = f"{budget.window:,}-token" if budget.window else "its"
    lighter = ("" if harness == "minimal"
               else f"; or use a lighter harness than {harness} (--harness minimal)")
    return (
        f"the request ({prompt_tokens:,} tokens, of which ~{fixed_tokens:,} are the "
        f"instructions and tool definitions) does not fit the model's {window} context "
        "window, and there is nothing in it to shorten. Give the server a larger context "
        "(llama-server -c 16384, Ollama OLLAMA_CONTEXT_LENGTH or the num_ctx option, "
        f"LM Studio's context length, vLLM --max-model-len){lighter}"
    )


def still_too_long(budget: ContextBudget, prompt_tokens: int | None) -> str:
    """The one line ending a turn whose shortened conversation overflowed again."""
    window = f" ({budget.window:,} tokens)" if budget.window else ""
    size = f" (the request: {prompt_tokens:,} tokens)" if prompt_tokens else ""
    return (
        f"the conversation does not fit the model's context window{window} even after "
        f"shortening it{size}; start a new session (/new), or give the server a larger "
        "context"
    )
