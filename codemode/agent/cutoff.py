"""Tool calls on their way into the conversation history.

A reply that hit the output-token limit (stop reason ``length``) can end in the middle
of a call's arguments. Running that call would run something the model did not finish
writing, and sending it back verbatim breaks the next request: llama-server refuses a
history whose tool-call arguments are not JSON (HTTP 500 "Failed to parse tool call
arguments as JSON"), and would refuse it again however often it is sent. So:

- the last call of a cut-off reply is dropped unless its arguments are a complete JSON
  object, and the model is told, in a message, that it was cut off and not run;
- any call whose arguments are not a JSON object (junk from a small model) still runs
  through the harness, which reports the problem to the model, but the history keeps
  a JSON object in its place: the repaired arguments that ran, the raw text under the
  one string field of a single-field tool (exec's program), or the raw text under
  ``_raw_arguments``. The model sees what it sent; the server sees valid JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from codemode.providers.base import AssistantMessage, Message, ToolCall, ToolSpec

RAW_ARGUMENTS = "_raw_arguments"


@dataclass
class SettledReply:
    """A model reply split into what the history keeps and what the harness runs."""

    history: AssistantMessage
    run: AssistantMessage
    dropped: list[ToolCall] = field(default_factory=list)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _single_string_field(spec: ToolSpec | None) -> str | None:
    """The property name of a tool whose arguments are one string (exec's ``code``)."""
    if spec is None:
        return None
    if spec.freeform is not None:
        return spec.freeform.field
    props: dict[str, Any] = spec.parameters.get("properties") or {}
    if len(props) == 1:
        name, schema = next(iter(props.items()))
        if isinstance(schema, dict) and schema.get("type") == "string":
            return name
    return None


def history_arguments(call: ToolCall, spec: ToolSpec | None) -> str:
    """``call.arguments`` as a JSON object text that every wire's server accepts."""
    if call.freeform or _json_object(call.arguments or "{}") is not None:
        return call.arguments
    from codemode.harnesses.repair import ArgumentError, repair_json

    try:
        repaired = repair_json(call.arguments)
    except ArgumentError:
        repaired = None
    if isinstance(repaired, dict):
        return json.dumps(repaired, ensure_ascii=False)
    single = _single_string_field(spec)
    key = single if single is not None and call.arguments.strip()[:1] != "{" else RAW_ARGUMENTS
    return json.dumps({key: call.arguments}, ensure_ascii=False)


def is_cut_off(call: ToolCall) -> bool:
    """Whether a call that ended a ``length`` reply may be unfinished: freeform input
    cannot be checked, function arguments are finished when they are a JSON object."""
    return call.freeform or _json_object(call.arguments or "") is None


def settle_reply(
    message: AssistantMessage, stop_reason: str, specs: list[ToolSpec]
) -> SettledReply:
    """Drop a cut-off last call and make every kept call's history arguments valid."""
    calls = list(message.tool_calls)
    dropped: list[ToolCall] = []
    if stop_reason == "length" and calls and is_cut_off(calls[-1]):
        dropped.append(calls.pop())
    by_name = {spec.name: spec for spec in specs}
    history_calls = [
        call.model_copy(update={"arguments": history_arguments(call, by_name.get(call.name))})
        for call in calls
    ]
    return SettledReply(
        history=message.model_copy(update={"tool_calls": history_calls}),
        run=message.model_copy(update={"tool_calls": calls}),
        dropped=dropped,
    )


def valid_history(messages: list[Message], specs: list[ToolSpec]) -> list[Message]:
    """``messages`` with every assistant call's arguments made valid (a session file
    written before this check existed may hold a cut-off call)."""
    by_name = {spec.name: spec for spec in specs}
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = [
                call.model_copy(
                    update={"arguments": history_arguments(call, by_name.get(call.name))}
                )
                for call in message.tool_calls
            ]
            message = message.model_copy(update={"tool_calls": calls})
        out.append(message)
    return out


def cutoff_note(dropped: list[ToolCall], limit: int | None) -> str:
    """The message that tells the model its call was cut off and not run."""
    names = ", ".join(sorted({call.name for call in dropped}))
    where = f" ({limit} tokens)" if limit else ""
    return (
        f"Your last reply was cut off by the output-token limit{where} in the middle of a "
        f"call to {names}; that call was not run. Send it again, shorter: split a long "
        "program or file into several smaller calls."
    )
