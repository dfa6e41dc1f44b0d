"""JSON schemas of tool arguments, shaped the way every wire accepts them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            return _inline({k: v for k, v in target.items() if k != "title"}, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with ``$ref``s inlined and titles dropped.

    Several providers reject ``$defs``/``$ref`` in function parameters, and titles
    only cost the model tokens.
    """
    schema = model.model_json_schema()
    inlined: dict[str, Any] = _inline(schema, schema.get("$defs", {}))
    return inlined
