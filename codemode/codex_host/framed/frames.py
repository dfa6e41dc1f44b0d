"""The framed stdio protocol's frames: a JSON message after its length as four
little-endian bytes (``framed/protocol.py`` serves the protocol). A frame is read whole before it
is decoded, so its size is capped (``MAX_FRAME``); one nested too deeply to decode, or
holding more JSON elements than ``json_cost.MAX_ELEMENTS`` or an integer longer than
``json_cost.MAX_INT_DIGITS``, is an ``Unreadable`` its sender can still be answered for.

Why count elements: the decoder makes an object of every one (``process/json_cost.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
import struct
from typing import Any, NamedTuple

from codemode.codex_host.session.items import well_formed
from codemode.process.json_cost import TooCostly, elements_over, loads, refusal

MAX_FRAME = 64 * 1024 * 1024


class FrameError(Exception):
    pass


class Unreadable(NamedTuple):
    """A frame refused without ending the connection (JSON nested deeper than the
    decoder goes): what its envelope says before its first nested value, when that
    much could be read, so its sender can be answered."""

    reason: str
    kind: str | None  # the envelope's "type"
    id: Any  # the envelope's "id"


# The envelope's own fields, before its first nested value: Codex writes "type" and
# "id" ahead of the request or result they carry.
_ENVELOPE_TYPE = re.compile(rb'"type"\s*:\s*"([a-zA-Z/]{1,40})"')
_ENVELOPE_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,19})[\s,}]')


def _unreadable(payload: bytes, reason: str) -> Unreadable:
    head = payload[:4096]
    nested = min((at for at in (head.find(b"{", 1), head.find(b"[")) if at >= 0), default=-1)
    head = head[:nested] if nested >= 0 else b""
    kind, ident = _ENVELOPE_TYPE.search(head), _ENVELOPE_ID.search(head)
    return Unreadable(
        reason,
        kind.group(1).decode() if kind else None,
        int(ident.group(1)) if ident else None,
    )


async def read_frame(reader: asyncio.StreamReader) -> Any | None:
    """The next message, or None at a clean end of input; a frame too deeply nested to
    decode is an ``Unreadable``."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("the input ended inside a frame's length") from None
    (length,) = struct.unpack("<I", head)
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes is over the {MAX_FRAME}-byte limit")
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("the input ended inside a frame") from None
    if elements_over(payload):
        return _unreadable(payload, f"the frame holds {refusal()}")
    try:
        return loads(payload)
    except TooCostly as exc:  # (an integer of thousands of digits: seconds to convert)
        return _unreadable(payload, f"the frame holds {exc}")
    except ValueError as exc:
        raise FrameError(f"a frame is not JSON: {exc}") from None
    except RecursionError:  # the decoder's own depth limit: a thousand levels or so
        return _unreadable(payload, "the frame is nested too deeply to read")


def encode_frame(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        payload = text.encode()
    except UnicodeEncodeError:  # a lone surrogate (a client's id, a tool's input)
        payload = well_formed(text).encode()  # each sent as U+FFFD
    return struct.pack("<I", len(payload)) + payload
