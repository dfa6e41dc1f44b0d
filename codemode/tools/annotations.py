"""A Python function's annotations as a tool's declared types, and its results as JSON.

An embedder's function (``ToolHost.tool``, ``define_tool``) declares its arguments and
result with ordinary annotations. They are checked when the tool is registered: an
annotation pydantic cannot describe (``typing.TypedDict`` on Python 3.11, an arbitrary
class) is refused there, with the tool's name, not at the first call or the first
``typescript()``.

What a tool returns reaches JavaScript as JSON, converted by one rule (``to_json``):

- ``str``, ``int``, ``float``, ``bool``, ``None``: as they are;
- a pydantic model: its ``model_dump(mode="json")``; a dataclass: its fields, an object;
- ``dict`` (keys ``str``, ``int``, ``float`` or ``bool``, written as text): an object;
  ``list``, ``tuple``, ``set``, ``frozenset``: an array;
- ``datetime``, ``date``, ``time``: ISO 8601 text (``2024-05-01T12:00:00+00:00``);
  ``timedelta``: seconds, a number;
- ``Enum``: its value; ``Path``, ``UUID``, ``Decimal``: their text;
- anything else, ``bytes`` included, is refused: the call fails with an error naming
  the tool, where in the result the value was and what to return instead. (Bytes have
  no single right text: decode them, or base64-encode them, in the tool.)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import inspect
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, RootModel

# Return annotations that declare nothing: the result is declared as ``unknown``.
_UNDECLARED: tuple[object, ...] = (inspect.Parameter.empty, Any, object)


class NotJson(TypeError):
    """A tool's result holds a value with no JSON form; ``where`` is its path in it."""

    def __init__(self, value: object, where: str) -> None:
        kind = type(value).__name__
        if isinstance(value, bytes | bytearray | memoryview):
            advice = "decode them to text, or base64-encode them, before returning"
        else:
            advice = (
                "return JSON data (dict, list, str, int, float, bool, None), a pydantic "
                "model, a dataclass, a date or time, an Enum, a Path, a UUID or a Decimal"
            )
        super().__init__(f"returned {kind} at {where}, which has no JSON form: {advice}")


# Tuples, not ``str | bool | ...``: a union written in the call is built anew on every
# call (every tool call's result goes through here).
_SCALARS = (str, bool, int, float)


def to_json(value: object, where: str = "result") -> Any:
    """``value`` as plain JSON data, by the rule in this module's docstring."""
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):  # before BaseModel: the common result, and the cheaper test
        out = {}
        for key, item in value.items():
            if not isinstance(key, _SCALARS):
                raise NotJson(key, f"{where} (a key)")
            out[str(key)] = to_json(item, f"{where}.{key}")
        return out
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, enum.Enum):
        return to_json(value.value, where)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, PurePath | uuid.UUID | Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name), f"{where}.{f.name}")
            for f in dataclasses.fields(value)
        }
    raise NotJson(value, where)


def result_model(hint: object, tool_name: str) -> type[BaseModel] | None:
    """The model declaring a result annotated ``hint``: the model itself, a ``RootModel``
    around anything else pydantic describes (``float``, ``list[str]``, a TypedDict), or
    None when the annotation declares nothing. Raises TypeError for one it cannot."""
    if hint in _UNDECLARED or hint is None or hint is type(None):
        return None
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        model: type[BaseModel] = hint
    else:
        title = "".join(p[:1].upper() + p[1:] for p in tool_name.split("_")) + "Result"
        try:
            model = type(title, (RootModel[hint],), {"__module__": __name__})  # type: ignore[valid-type]
        except Exception as exc:
            raise TypeError(_refusal(tool_name, "return annotation", hint, exc)) from None
    check_model(model, tool_name, "return annotation", hint)
    return model


def check_model(
    model: type[BaseModel], tool_name: str, what: str, hint: object = None
) -> None:
    """Build ``model``'s JSON schema now, so that a bad annotation fails at registration."""
    try:
        model.model_json_schema(mode="serialization")
        model.model_json_schema(mode="validation")
    except Exception as exc:
        raise TypeError(_refusal(tool_name, what, hint or model, exc)) from None


def check_annotation(hint: object, tool_name: str, what: str) -> None:
    """Raise TypeError now if pydantic cannot describe ``hint`` (an argument's type)."""
    from pydantic import TypeAdapter

    try:
        TypeAdapter(hint).json_schema()  # type: ignore[arg-type]
    except Exception as exc:
        raise TypeError(_refusal(tool_name, what, hint, exc)) from None


def _refusal(tool_name: str, what: str, hint: object, exc: Exception) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    shown = getattr(hint, "__name__", None) or repr(hint)
    return f"tool {tool_name!r}: its {what} {shown} cannot be declared to JavaScript: {first}"
