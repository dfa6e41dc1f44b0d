"""``exec --output-schema FILE``: the final answer must be JSON valid for a JSON Schema.

The schema is shown to the model in the instructions; an answer that is not valid is
sent back once with the validation error (``Session.final_check``), and a second
invalid answer fails the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from codemode.locations import small_files


class SchemaProblem(ValueError):
    """The schema file cannot be used; the message names it and says why."""


def load_schema(path: Path) -> dict[str, Any]:
    from jsonschema import SchemaError  # lazy: jsonschema, only with --output-schema
    from jsonschema.validators import validator_for

    try:
        # Regular files only, read at once and capped: the path may lie in a repository
        # a command shaped (a FIFO there would hang the start, /dev/zero fill memory).
        schema = json.loads(small_files.read_text(path))
    except OSError as exc:
        raise SchemaProblem(f"--output-schema {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SchemaProblem(f"--output-schema {path}: not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise SchemaProblem(f"--output-schema {path}: a JSON Schema must be an object")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise SchemaProblem(
            f"--output-schema {path}: not a valid JSON Schema: {exc.message}"
        ) from None
    return schema


def schema_instructions(schema: dict[str, Any]) -> str:
    """The instructions section telling the model the answer's format."""
    template = resources.files("codemode.agent").joinpath("output_schema.md").read_text("utf-8")
    return template.replace("{{schema}}", json.dumps(schema, indent=2))


def answer_problem(schema: dict[str, Any], answer: str) -> str | None:
    """None when ``answer`` is JSON valid for ``schema``; else what is wrong."""
    from jsonschema.validators import validator_for  # lazy: jsonschema, only with --output-schema

    try:
        value = json.loads(answer)
    except ValueError as exc:
        return f"it is not valid JSON ({exc})"
    validator = validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"it does not match the schema at {where}: {first.message}{more}"


def strict_compatible(schema: object) -> bool:
    """Whether a wire's strict structured output accepts ``schema`` as it is: every
    object lists all its properties as required and forbids others. Other schemas are
    still enforced, by the check after the answer."""
    if isinstance(schema, list):
        return all(strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
    children: list[object] = []
    for key in ("properties", "$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            children.extend(schema[key].values())
    children += [schema[key] for key in ("items", "anyOf", "oneOf", "allOf") if key in schema]
    return all(strict_compatible(child) for child in children)


def final_check(schema: dict[str, Any]) -> Callable[[str], str | None]:
    """A ``Session.final_check`` enforcing ``schema``."""

    def check(answer: str) -> str | None:
        problem = answer_problem(schema, answer.strip())
        if problem is None:
            return None
        return (
            f"{problem}; it must be exactly one JSON value valid for the output schema, "
            "with no prose and no code fences"
        )

    return check
