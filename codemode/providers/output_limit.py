"""Telling a reply cut off by the output-token limit from one the model finished.

Servers do not always say so. llama-cpp-python's server ends a tool call cut off by
``max_tokens`` with ``finish_reason: "tool_calls"`` and the arguments half written
(``{"path": "/Users``), and its stream carries no usage. A reply is taken as cut off
(stop reason ``length``, which ``codemode.agent.cutoff`` acts on: the unfinished call
is not run, and the model is told to send it again, shorter) when:

- the server says so (``length``);
- the usage it reports reaches the limit that was asked for (reasoning tokens the
  server counts apart are left out: some services, DeepSeek's reasoner among them,
  keep them outside ``max_tokens``, and a finished answer must not look cut off);
- it streamed at least as many pieces of answer and call text as the limit allows:
  each streamed piece holds at least one token, so that many pieces are at least that
  many tokens;
- it reported no usage, and its last tool call's arguments stop inside a JSON value
  (an open string, object or array). Such arguments cannot be parsed or repaired
  whatever the cause, so calling them cut off loses nothing and tells the model the
  likelier story.
"""

from __future__ import annotations

from codemode.providers.base import Completed

LENGTH = "length"


def settle_completed(done: Completed, limit: int | None) -> Completed:
    """``done`` with its stop reason settled (for wires that count no pieces)."""
    calls = done.message.tool_calls
    last = calls[-1].arguments if calls and not calls[-1].freeform else None
    stop = settle_stop_reason(
        done.stop_reason, limit=limit, output_tokens=done.usage.output_tokens,
        reasoning_tokens=done.usage.reasoning_tokens, last_arguments=last,
    )
    return done if stop == done.stop_reason else done.model_copy(update={"stop_reason": stop})


def settle_stop_reason(
    stop: str,
    *,
    limit: int | None,
    output_tokens: int,
    reasoning_tokens: int = 0,
    pieces: int = 0,
    last_arguments: str | None = None,
) -> str:
    """``stop`` as the server gave it, or ``length`` when the reply was cut off.

    ``output_tokens`` is 0 where the server reported no usage, ``reasoning_tokens`` the
    part of it the server said was reasoning; ``pieces`` the non-empty text and
    argument pieces streamed, reasoning left out as above (0 where not counted);
    ``last_arguments`` the raw argument text of the reply's last function call.
    """
    if stop == LENGTH:
        return stop
    answer_tokens = output_tokens - reasoning_tokens
    if limit is not None and limit > 0 and (answer_tokens >= limit or pieces >= limit):
        return LENGTH
    if output_tokens == 0 and last_arguments is not None and stops_inside_json(last_arguments):
        return LENGTH
    return stop


def stops_inside_json(text: str) -> bool:
    """Whether ``text`` starts a JSON object or array and ends before closing it (or
    inside a string). Text that closes its value, valid or not, is not cut off."""
    body = text.strip()
    if not body.startswith(("{", "[")):
        return False
    depth = 0
    in_string = escaped = False
    for ch in body:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0:
                return False
    return True
