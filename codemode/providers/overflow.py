"""The sizes a context-overflow error reports: the server's context window and how long
the refused prompt was, read from the error body's fields or from its message.

Each service says it its own way (looked up in their sources and public reports):

- llama.cpp's llama-server: type ``exceed_context_size_error`` with the fields
  ``n_prompt_tokens`` and ``n_ctx``; message "request (N tokens) exceeds the available
  context size (M tokens), try increasing it". Older builds: "input (N tokens) is
  larger than the max context size (M tokens)".
- llama-cpp-python: "Requested tokens (N) exceed context window of M".
- LM Studio: "Trying to keep the first N tokens when context the overflows. However, the
  model is loaded with context length of only M tokens, which is not enough."
- vLLM: "This model's maximum context length is M tokens. However, you requested N
  tokens (P in the messages, C in the completion)", newer "... and your request has P
  input tokens", or "The decoder prompt (length P) is longer than the maximum model
  length of M".
- OpenAI (and the many services that copy its wording): "This model's maximum context
  length is M tokens. However, your messages resulted in N tokens."
- Anthropic: "prompt is too long: N tokens > M maximum".
- Ollama: "the input length exceeds the context length" (no numbers), or "prompt too
  long; exceeded max context length by N tokens" (only the excess).
- Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Each pattern names what it finds: ctx (the window), prompt (the refused input) or
# excess (how far over it went). The first match of each name wins.
_PATTERNS = [
    re.compile(r"request \((?P<prompt>\d[\d,]*) tokens\) exceeds the available context size "
               r"\((?P<ctx>\d[\d,]*) tokens\)", re.I),
    re.compile(r"input \((?P<prompt>\d[\d,]*) tokens\) is larger than the max context size"
               r"(?: \((?P<ctx>\d[\d,]*) tokens\))?", re.I),
    re.compile(r"requested tokens \((?P<prompt>\d[\d,]*)\) exceed context window of "
               r"(?P<ctx>\d[\d,]*)", re.I),
    re.compile(r"keep the first (?P<prompt>\d[\d,]*) tokens.*?context length of only "
               r"(?P<ctx>\d[\d,]*) tokens", re.I | re.S),
    re.compile(r"\((?P<prompt>\d[\d,]*) in the messages", re.I),
    re.compile(r"your request has (?P<prompt>\d[\d,]*) input tokens", re.I),
    re.compile(r"decoder prompt \(length (?P<prompt>\d[\d,]*)\)", re.I),
    re.compile(r"maximum (?:context|model) length (?:is |of )?(?P<ctx>\d[\d,]*)", re.I),
    re.compile(r"messages resulted in (?P<prompt>\d[\d,]*) tokens", re.I),
    re.compile(r"prompt is too long: (?P<prompt>\d[\d,]*) tokens > (?P<ctx>\d[\d,]*) maximum",
               re.I),
    re.compile(r"exceeded max context length by (?P<excess>\d[\d,]*) tokens", re.I),
    re.compile(r"input token count \((?P<prompt>\d[\d,]*)\) exceeds the maximum number of "
               r"tokens allowed \((?P<ctx>\d[\d,]*)\)", re.I),
]


@dataclass(frozen=True)
class OverflowSizes:
    """What an overflow error says about sizes, in tokens (None: it does not say)."""

    context_window: int | None = None
    prompt_tokens: int | None = None
    excess_tokens: int | None = None


def overflow_sizes(payload: Any, message: str) -> OverflowSizes:
    """The sizes in an overflow error's body (``payload``) and ``message``."""
    found: dict[str, int] = {}
    inner = payload.get("error", payload) if isinstance(payload, dict) else None
    if isinstance(inner, dict):
        for key, name in (("n_ctx", "ctx"), ("n_prompt_tokens", "prompt")):
            value = inner.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                found[name] = value
    for pattern in _PATTERNS:
        match = pattern.search(message)
        if match is None:
            continue
        for name, text in match.groupdict().items():
            if text and name not in found:
                found[name] = int(text.replace(",", ""))
    return OverflowSizes(found.get("ctx"), found.get("prompt"), found.get("excess"))
