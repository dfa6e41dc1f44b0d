"""Tolerant reading of what models actually send.

Low-cost models get the format almost right: JSON arguments with a trailing comma,
single quotes or a raw newline inside a string; a tool call written into the message
text instead of the function-calling channel; a program wrapped in a Markdown fence or
sent as a JSON string. These functions repair what can be repaired without guessing,
and otherwise raise ``ArgumentError`` with a message precise enough for the model to
fix its next reply.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from codemode.providers.base import ToolCall

# Calls recovered from message text carry ids with this prefix: they are not part of
# the wire's function-calling record, so their results go back as plain user text.
RECOVERED_PREFIX = "recovered_"


class ArgumentError(ValueError):
    """Tool-call arguments that cannot be used; the message is for the model."""


# --- JSON repair -------------------------------------------------------------------------

_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def strip_fence(text: str) -> str:
    """The body of ``text`` if it is one fenced block, else ``text`` unchanged."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def _normalise(text: str) -> str:
    """Rewrite near-JSON into JSON: quotes, raw control characters, trailing commas,
    Python literals. Never changes the meaning of text that was already valid."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            quote, i = ch, i + 1
            buf = ['"']
            while i < n and text[i] != quote:
                c = text[i]
                if c == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    # \' is not a JSON escape; inside a single-quoted string it is a quote.
                    buf.append("'" if nxt == "'" else c + nxt)
                    i += 2
                    continue
                if c == '"':
                    buf.append('\\"')
                elif c == "\n":
                    buf.append("\\n")
                elif c == "\r":
                    buf.append("\\r")
                elif c == "\t":
                    buf.append("\\t")
                elif ord(c) < 0x20:
                    buf.append(f"\\u{ord(c):04x}")
                else:
                    buf.append(c)
                i += 1
            buf.append('"')
            out.append("".join(buf))
            i += 1  # the closing quote (or the end of an unterminated string)
            continue
        if ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                i += 1  # a trailing comma
                continue
        if ch.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            k = j
            while k < n and text[k] in " \t":
                k += 1
            if k < n and text[k] == ":" and word not in _PY_LITERALS:
                out.append(f'"{word}"')  # an unquoted key
            else:
                out.append(_PY_LITERALS.get(word, word))
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _where(text: str, exc: json.JSONDecodeError) -> str:
    line = text.splitlines()[exc.lineno - 1] if text.splitlines() else ""
    near = line[max(0, exc.colno - 20) : exc.colno + 20]
    return f"{exc.msg} at line {exc.lineno} column {exc.colno} (near {near!r})"


def repair_json(text: str, *, what: str = "the arguments") -> Any:
    """Parse ``text`` as JSON, repairing the slips models make; ArgumentError if hopeless.

    A JSON string that itself holds a JSON object (double-encoded arguments) is decoded
    once more.
    """
    stripped = strip_fence(text.strip()) if text.strip() else "{}"
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as first:
        try:
            value = json.loads(_normalise(stripped))
        except json.JSONDecodeError:
            raise ArgumentError(
                f"{what} are not valid JSON: {_where(stripped, first)}; send one JSON object "
                'with double-quoted keys and strings, e.g. {"path": "src/app.py"}'
            ) from None
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            inner = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(inner, dict):
            return inner
    return value


def parse_call_arguments(call: ToolCall, freeform_field: str | None = None) -> Any:
    """A call's arguments as JSON data (a freeform call's raw text goes in ``freeform_field``)."""
    if call.freeform:
        if freeform_field is None:
            raise ArgumentError(f"{call.name} takes JSON arguments, not raw text")
        return {freeform_field: call.arguments}
    return repair_json(call.arguments, what=f"the arguments of {call.name}")


# --- programs ----------------------------------------------------------------------------


def unwrap_program(value: object) -> str:
    """The JavaScript source in what was sent as a program.

    Accepts the source itself, the source in a Markdown fence, a JSON string holding
    the source, or a JSON object with a ``code`` field (any of these nested once).
    """
    if isinstance(value, dict):
        code = value.get("code", value.get("input", value.get("program")))
        if not isinstance(code, str):
            raise ArgumentError('exec needs {"code": "<JavaScript program>"}')
        value = code
    if not isinstance(value, str):
        raise ArgumentError('exec needs {"code": "<JavaScript program>"}')
    text = value.strip()
    if text.startswith('"') and text.endswith('"'):
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, str):
            text = decoded.strip()
    elif text.startswith("{") and '"code"' in text[:40]:
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("code"), str):
            text = decoded["code"].strip()
    return strip_fence(text).strip()


# --- tool names --------------------------------------------------------------------------


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def closest_name(name: str, names: Iterable[str]) -> str | None:
    """The valid tool name nearest to ``name``: same letters ignoring case and
    separators first, then the most similar spelling."""
    candidates = list(names)
    squashed = {_squash(c): c for c in candidates}
    if _squash(name) in squashed:
        return squashed[_squash(name)]
    lowered = {c.lower(): c for c in candidates}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[match[0]] if match else None


def unknown_tool_message(name: str, names: list[str], *, prefix: str = "") -> str:
    hint = closest_name(name, names)
    suggestion = f"; did you mean {prefix}{hint}?" if hint else ""
    return f"unknown tool {name!r}{suggestion} (tools: {', '.join(names)})"


# --- tool calls written into the text ----------------------------------------------------

_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER_TAG = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
_JSON_FENCE = re.compile(r"```(?:json|tool_call|tool)?[ \t]*\n(.*?)\n?```", re.DOTALL)


def _typed(value: str, schema: Mapping[str, object] | None) -> object:
    """An XML-tag parameter value, typed by the tool's schema (strings stay as written)."""
    kind = (schema or {}).get("type")
    if kind == "string" or (kind is None and value.strip()[:1] not in ("[", "{")):
        return value
    try:
        return repair_json(value)
    except ArgumentError:
        return value


def _call_from_object(obj: object, names: set[str]) -> tuple[str, object] | None:
    if not isinstance(obj, dict):
        return None
    inner = obj.get("function")
    if isinstance(inner, dict):  # OpenAI's own shape, pasted as text
        obj = inner
    name = obj.get("name") or obj.get("tool") or obj.get("tool_name")
    if not isinstance(name, str):
        return None
    args = obj.get("arguments", obj.get("parameters", obj.get("args", obj.get("input", {}))))
    if isinstance(args, str):
        try:
            args = repair_json(args)
        except ArgumentError:
            pass
    return name, args


def recover_text_calls(
    text: str, schemas: Mapping[str, Mapping[str, Any]]
) -> tuple[list[ToolCall], str | None]:
    """Tool calls a model wrote into its message text, and a problem report if some
    call-like text could not be read.

    Understands Hermes/Qwen ``<tool_call>{json}</tool_call>``, Qwen3-Coder's
    ``<function=NAME><parameter=X>...</parameter></function>`` and a ```json block
    holding ``{"name": ..., "arguments": ...}``. A JSON block only counts when it names
    one of ``schemas`` (so an answer that shows JSON is not mistaken for a call).
    """
    names = set(schemas)
    found: list[tuple[str, object]] = []
    problem: str | None = None

    for fn_name, body in _FUNCTION_TAG.findall(text):
        props = (schemas.get(fn_name) or {}).get("properties", {})
        args = {k: _typed(v, props.get(k)) for k, v in _PARAMETER_TAG.findall(body)}
        found.append((fn_name, args))
    if not found:
        for body in _TOOL_CALL_TAG.findall(text):
            try:
                obj = repair_json(body, what="the <tool_call> body")
            except ArgumentError as exc:
                problem = str(exc)
                continue
            call = _call_from_object(obj, names | {str((obj or {}).get("name"))})
            if call is None:
                problem = 'a <tool_call> must hold {"name": ..., "arguments": {...}}'
            else:
                found.append(call)
    if not found and "<tool_call>" not in text:
        for body in _JSON_FENCE.findall(text):
            try:
                obj = repair_json(body)
            except ArgumentError:
                continue
            for item in obj if isinstance(obj, list) else [obj]:
                call = _call_from_object(item, names)
                if call is not None and (call[0] in names or closest_name(call[0], names)):
                    found.append(call)

    calls = [
        ToolCall(
            id=f"{RECOVERED_PREFIX}{i}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
        )
        for i, (name, args) in enumerate(found)
    ]
    return calls, (problem if not calls else None)
