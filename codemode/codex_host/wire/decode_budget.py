"""How many fields a request message may hold before it is decoded
(docs/threat-model.md, family 6: decoding cost counts elements and nesting, not only
bytes).

protobuf's runtime (upb) decodes in C, but what it makes grows with the element count:
4 MiB of empty ``enabled_tools`` entries are two million messages (about 100 ms and
hundreds of MB in upb), and every one of them would then be a Python object to the
handler. A request of this protocol holds a handful of fields and a few per tool, so
the fields are counted first, in every message the request's type declares (and in
unknown groups, which upb would recurse into), by walking the tags and skipping every
other length-delimited payload unread (a string, bytes, an unknown field: upb keeps
those whole, at the cost of their bytes). The walk stops at ``MAX_FIELDS``, so its own
cost is bounded whatever the bytes are.
"""

from __future__ import annotations

from typing import Any

# Far above any real request (Codex sends a few fields per tool it enables, a few hundred
# tools at most) and far below what would cost the host: the walk is ~1 µs a field.
MAX_FIELDS = 20_000
MAX_DEPTH = 64  # nested messages and groups; upb's own limit is 100

# A message type's message-typed fields, by number: where the walk descends.
Plan = dict[int, "Plan"]


class OverBudget(ValueError):
    """The message holds more fields, or nests deeper, than a request may."""


class Malformed(ValueError):
    """The bytes are not a protobuf message."""


def plan(descriptor: Any) -> Plan:
    """The walk's map of ``descriptor`` (a protobuf message descriptor)."""
    return _plan(descriptor, {})


def _plan(descriptor: Any, made: dict[str, Plan]) -> Plan:
    found = made.get(descriptor.full_name)
    if found is not None:
        return found
    made[descriptor.full_name] = out = {}  # before the fields: a type may contain itself
    for field in descriptor.fields:
        if field.message_type is not None:
            out[field.number] = _plan(field.message_type, made)
    return out


def check(data: bytes, plan: Plan) -> None:
    """Raise ``OverBudget`` if ``data`` holds more than ``MAX_FIELDS`` fields or nests
    deeper than ``MAX_DEPTH``, ``Malformed`` if it is not a message's encoding."""
    at, end, left, groups = 0, len(data), MAX_FIELDS, 0
    outer: list[tuple[int, Plan]] = []  # the enclosing messages: where each ends, its plan
    while True:
        if at >= end:
            if at > end:
                raise Malformed("a field runs past the end of its message")
            if not outer:
                return
            end, plan = outer.pop()
            continue
        left -= 1
        if left < 0:
            raise OverBudget(f"the request holds more than {MAX_FIELDS} fields")
        key, at = _varint(data, at)
        wire = key & 7
        if wire == 2:
            length, at = _varint(data, at)
            inner = plan.get(key >> 3) if not groups else None
            if inner is None:
                at += length
                continue
            if at + length > end:
                raise Malformed("a field runs past the end of its message")
            if len(outer) + groups >= MAX_DEPTH:
                raise OverBudget(f"messages nested more than {MAX_DEPTH} deep")
            outer.append((end, plan))
            end, plan = at + length, inner
        elif wire == 0:
            _, at = _varint(data, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 3:
            groups += 1
            if len(outer) + groups >= MAX_DEPTH:
                raise OverBudget(f"groups nested more than {MAX_DEPTH} deep")
        elif wire == 4 and groups:
            groups -= 1
        else:
            raise Malformed(f"a field of wire type {wire}")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):
        if at >= len(data):
            raise Malformed("a varint runs past the end of the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
    raise Malformed("a varint longer than 10 bytes")
