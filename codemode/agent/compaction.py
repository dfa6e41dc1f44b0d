"""Keeping a conversation inside the model's context window.

Sizes are estimated without the model's tokenizer: text is counted in *units* (a digit,
a run of up to six letters, a punctuation mark, a line break), which over-counts most
tokenizers a little and never badly under-counts one (digit-by-digit tokenizers such
as SmolLM2's or Llama 2's turn ``seq 1 3000`` into ~14,000 tokens; four characters a
token would say 3,500). Each request's real input size, from the usage the server
reports or from an overflow error, calibrates the tokens per unit.

What is shortened first is what is largest and least needed: tool outputs of earlier
turns (replaced by a note), then this turn's tool outputs (head and tail kept around a
note that says what was cut and how to see it), then earlier turns themselves (dropped,
oldest first), then this turn's outputs down to a few lines.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from codemode.providers.base import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

REMOVED = "[output removed to fit the context window; run the call again if needed]"
# Tool outputs of the current turn keep at least this many characters while earlier
# turns can still go, and FLOOR_CHARS at the very least.
KEEP_CHARS = 2000
FLOOR_CHARS = 400
# Per message: the chat template's role markers and separators.
MESSAGE_UNITS = 8
# An image, whatever its size (the providers' per-image costs are of this order).
IMAGE_UNITS = 1000
# The answer needs room too: reserved when max_output_tokens is not set (a share of the
# window, at most this many tokens).
DEFAULT_RESERVE = 1024
# Of the window, kept free for the estimate's error.
MARGIN = 0.04

_UNITS = re.compile(r"\d|[^\W\d_]{1,6}|[^\w\s]|\n")


@lru_cache(maxsize=8192)
def text_units(text: str) -> int:
    """The size of ``text`` in units (see the module docstring)."""
    return len(_UNITS.findall(text))


def message_units(message: Message) -> int:
    if isinstance(message, UserMessage):
        return MESSAGE_UNITS + text_units(message.text) + IMAGE_UNITS * len(message.images)
    if isinstance(message, AssistantMessage):
        calls = sum(text_units(c.name) + text_units(c.arguments) + 4 for c in message.tool_calls)
        return MESSAGE_UNITS + text_units(message.text) + text_units(message.reasoning) + calls
    return MESSAGE_UNITS + text_units(message.content)


def request_units(instructions: str, tools: Sequence[ToolSpec], messages: Sequence[Message]) -> int:
    """The estimated size of a request: instructions, tool definitions and messages."""
    specs = json.dumps([t.model_dump(exclude_none=True) for t in tools], sort_keys=True)
    return (text_units(instructions) + text_units(specs)
            + sum(message_units(m) for m in messages))


def head_and_tail(text: str, keep: int) -> str:
    """``text`` cut to about ``keep`` characters: its head and tail, at line breaks where
    there are some, around a note saying what was left out and how to see it."""
    if len(text) <= keep:
        return text
    head_end = _line_break_before(text, keep * 3 // 5)
    tail_start = _line_break_after(text, len(text) - (keep - head_end))
    if tail_start <= head_end:
        return text
    middle = text[head_end:tail_start]
    lines = middle.count("\n")
    note = (f"\n[... {len(middle):,} characters ({lines:,} lines) cut from the middle of this "
            "output to fit the context window; to see them, run it again with a narrower "
            "output (grep, head, tail, sed -n) ...]\n")
    return text[:head_end].rstrip("\n") + note + text[tail_start:].lstrip("\n")


def _line_break_before(text: str, at: int) -> int:
    cut = text.rfind("\n", max(0, at - at // 4), at)
    return cut if cut > 0 else at


def _line_break_after(text: str, at: int) -> int:
    span = (len(text) - at) // 4
    cut = text.find("\n", at, at + span)
    return cut + 1 if cut >= 0 else at


@dataclass
class Shortened:
    """What one shortening did, and where the current turn starts now."""

    turn_start: int
    removed: int = 0  # earlier turns' outputs replaced by a note
    trimmed: int = 0  # outputs cut to their head and tail
    dropped: int = 0  # messages of earlier turns dropped
    saved: int = 0  # units
    short: int = 0  # units still over the target (0: it fits)
    cut: list[ToolResultMessage] = field(default_factory=list)  # the outputs trimmed

    def describe(self) -> str:
        parts = []
        if self.trimmed:
            parts.append(f"{self.trimmed} tool output{_s(self.trimmed)} cut to head and tail")
        if self.removed:
            parts.append(f"{self.removed} earlier output{_s(self.removed)} removed")
        if self.dropped:
            parts.append(f"{self.dropped} earlier message{_s(self.dropped)} dropped")
        return ", ".join(parts) or "nothing to shorten"

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.trimmed or self.dropped)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def shorten(messages: list[Message], turn_start: int, excess: int) -> Shortened:
    """Shorten ``messages`` in place by at least ``excess`` units where it can;
    ``turn_start`` is the index of the current turn's first message."""
    done = Shortened(turn_start=turn_start)

    def need() -> int:
        return excess - done.saved

    # 1. Earlier turns' tool outputs, largest first, become a note.
    earlier = [m for m in messages[:turn_start] if isinstance(m, ToolResultMessage)]
    for message in sorted(earlier, key=lambda m: -len(m.content)):
        if need() <= 0:
            break
        if len(message.content) > len(REMOVED):
            before = text_units(message.content)
            message.content = REMOVED
            done.saved += before - text_units(REMOVED)
            done.removed += 1
    # 2. This turn's tool outputs, older and larger first, to their head and tail.
    _trim_current(messages, done, excess, KEEP_CHARS)
    # 3. Earlier turns, oldest first.
    if need() > 0 and done.turn_start > 0:
        _drop_earlier_turns(messages, done, excess)
    # 4. This turn's outputs down to a few lines.
    _trim_current(messages, done, excess, FLOOR_CHARS)
    done.short = max(0, need())
    return done


def _trim_current(messages: list[Message], done: Shortened, excess: int, floor: int) -> None:
    current = [(i, m) for i, m in enumerate(messages)
               if i >= done.turn_start and isinstance(m, ToolResultMessage)]
    last = max((i for i, _ in current), default=-1)
    # The latest call's output is what the model is about to read: cut it last.
    latest = {i for i, m in current if i > last - _round_size(messages, last)}
    for _, message in sorted(current, key=lambda p: (p[0] in latest, -len(p[1].content))):
        need = excess - done.saved
        if need <= 0:
            return
        size = len(message.content)
        if size <= floor:
            continue
        units = text_units(message.content)
        per_char = units / size if size else 1.0
        # The note costs ~40 units and ~200 characters; cut a little more than the need.
        keep = max(floor, size - math.ceil((need + 60) / max(per_char, 0.01) * 1.05) - 200)
        cut = head_and_tail(message.content, keep)
        if len(cut) >= size:
            continue
        done.saved += units - text_units(cut)
        message.content = cut
        if not any(m is message for m in done.cut):
            done.cut.append(message)
            done.trimmed += 1


def _round_size(messages: list[Message], last: int) -> int:
    """How many tool results the assistant message before ``last`` asked for."""
    i = last
    while i >= 0 and isinstance(messages[i], ToolResultMessage):
        i -= 1
    return last - i


def _drop_earlier_turns(messages: list[Message], done: Shortened, excess: int) -> None:
    # A user message is a safe place to cut: tool results always follow their call.
    cuts = [i for i in range(1, done.turn_start + 1) if isinstance(messages[i], UserMessage)]
    saved = 0
    cut_at = done.turn_start
    running = 0
    start = 0
    for k in cuts:
        running += sum(message_units(m) for m in messages[start:k])
        start = k
        if done.saved + running >= excess:
            cut_at, saved = k, running
            break
    else:
        cut_at, saved = done.turn_start, running
    if cut_at <= 0:
        return
    del messages[:cut_at]
    first = messages[0]
    assert isinstance(first, UserMessage)
    note = (f"[{cut_at} earlier message{_s(cut_at)} of this conversation were dropped to fit "
            "the context window.]\n\n")
    messages[0] = first.model_copy(update={"text": note + first.text})
    done.saved += saved - text_units(note)
    done.dropped += cut_at
    done.turn_start -= cut_at


def compact_tool_results(messages: list[Message], keep: int = 1) -> int:
    """Replace the content of all but the last ``keep`` long tool results by a note
    (/compact); returns how many."""
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    cut = 0
    for message in results[: max(0, len(results) - keep)]:
        if len(message.content) > len(REMOVED):
            message.content = REMOVED
            cut += 1
    return cut
