"""Argument models of emulated tools, built from the JSON schema a harness table gives.

An emulated tool validates its calls with a strict pydantic model made from its table's
``parameters``, so a misspelt argument is reported as for our own tools.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from codemode.tools.base import StrictArgs


def pascal(name: str) -> str:
    """``name`` (any separators) in PascalCase, for model and interface names."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", name) if p)


def _annotation(schema: dict[str, Any], hint: str) -> Any:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_annotation(sub, f"{hint}{i}") for i, sub in enumerate(schema[key])]
            union = options[0]
            for option in options[1:]:
                union = union | option
            return union
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"]
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return str
    if kind == "integer":
        return int
    if kind == "number":
        return float
    if kind == "boolean":
        return bool
    if kind == "array":
        return list[_annotation(schema.get("items", {}), hint + "Item")]  # type: ignore[misc]
    if kind == "object" and "properties" in schema:
        return model_from_schema(hint, schema)
    if kind == "object":
        return dict[str, Any]
    return Any


def model_from_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A strict pydantic model accepting exactly the objects ``schema`` describes.

    Property names that are not Python identifiers (``-i``, ``-A``) become aliases.
    """
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, sub in schema.get("properties", {}).items():
        attr = prop if prop.isidentifier() and not prop.startswith("_") else (
            "arg_" + re.sub(r"\W", "_", prop).strip("_")
        )
        annotation = _annotation(sub, name + pascal(prop))
        extra: dict[str, Any] = {"description": sub.get("description")}
        if attr != prop:
            extra["alias"] = prop
        if prop in required:
            fields[attr] = (annotation, Field(..., **extra))
        else:
            fields[attr] = (annotation | None, Field(default=None, **extra))
    return create_model(name, __base__=StrictArgs, **fields)
