"""What a JSON text would cost this process to decode, found before it is decoded.

JSON's decoder makes an object of every element, so a text's cost is its element count,
not its bytes (docs/threat-model.md, family 6): 64 MiB of ``[],[],...`` cost 8 s of CPU
and 2 GB of memory, where a string that size costs its bytes. Every server here that
decodes what a client sends (the code-mode host's framed protocol, the MCP server's and
ACP's stdio lines) asks ``elements_over`` first.

Every ``,``, ``[`` and ``{`` is an upper bound on the elements, counted at the bytes'
speed; only a text past the bound is scanned again with its strings skipped (a command's
output full of commas is one string), and that scan stops at the bound.

One element costs more than its bytes: an integer, whose digits Python converts in time
that grows with their square (60 MiB of 4,000-digit numbers, 16,000 elements, cost 2 s).
``loads`` decodes with integers held to ``MAX_INT_DIGITS`` digits; it looks at them one
by one only when the text has so long a run of digits somewhere (a string's, mostly).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Commas, brackets and braces outside strings: far above a real message (a tool list's
# schemas, a tool's JSON result: thousands), and what the decoder makes of that many
# stays about 20 MB and 0.2 s (counting them costs about as much again, at worst).
MAX_ELEMENTS = 200_000

# With escaped backslashes and quotes taken out, a string is a quote to the next quote:
# one match whatever its length.
_TOKEN = re.compile(rb'"[^"]*"|[,\[{]')

# Digits of one integer: far past any id or count (2**256 has 78), and the whole frame
# of such numbers decodes in about the time the element bound allows (0.2 s).
MAX_INT_DIGITS = 128
_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_RUN = b"0" * (MAX_INT_DIGITS + 1)


class TooCostly(Exception):
    """A text refused by ``loads`` for what decoding it would cost (not a ValueError:
    callers that pass on undecodable text refuse this one)."""


def elements_over(text: bytes, limit: int = MAX_ELEMENTS) -> bool:
    """Whether ``text`` holds more than ``limit`` commas, brackets and braces outside its
    strings (or is no JSON a message could be: more than twice as many strings as
    those)."""
    if text.count(b",") + text.count(b"[") + text.count(b"{") <= limit:
        return False
    plain = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    found = tokens = 0
    for token in _TOKEN.finditer(plain):
        tokens += 1
        if plain[token.start()] != 0x22:  # not a string
            found += 1
        if found > limit or tokens > 3 * limit:
            return True
    return False


def refusal(limit: int = MAX_ELEMENTS) -> str:
    return f"more than {limit} JSON elements (its limit)"


def loads(text: bytes) -> Any:
    """``json.loads(text)``, refusing (``TooCostly``) an integer of more than
    ``MAX_INT_DIGITS`` digits before converting it; raises ValueError and RecursionError
    as ``json.loads`` does. Ask ``elements_over`` first."""
    if _RUN not in text.translate(_AS_ZERO):
        return json.loads(text)
    return json.loads(text, parse_int=_bounded_int)


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise TooCostly(f"an integer of more than {MAX_INT_DIGITS} digits (its limit)")
    return int(digits)


def too_costly(text: bytes) -> str | None:
    """Why decoding ``text`` would cost too much (for a reader that hands the text on to
    a decoder of its own), or None: the element bound, then an integer's digits (a text
    with so long a run of digits is decoded here once to look)."""
    if elements_over(text):
        return refusal()
    if _RUN in text.translate(_AS_ZERO):
        try:
            loads(text)
        except TooCostly as exc:
            return str(exc)
        except (ValueError, RecursionError):
            return None  # (its own decoder answers it)
    return None


# A request's id in its envelope (before its first nested value: JSON-RPC clients write
# "jsonrpc", "id" and "method" ahead of "params").
_REQUEST_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,19}|"(?:[^"\\]|\\.){0,1000}")\s*[,}]')


def refused_answer(head: bytes, why: str) -> bytes | None:
    """The JSON-RPC error line that answers a request refused unread, from its first
    bytes ``head``; None when they name no request id (a notification, or no JSON-RPC)."""
    nested = min((at for at in (head.find(b"{", 1), head.find(b"[")) if at >= 0), default=-1)
    found = _REQUEST_ID.search(head[:nested] if nested >= 0 else head)
    if found is None or b'"method"' not in head:
        return None
    error = {"code": -32600, "message": f"the request was refused: {why}"}
    answer = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "error": error}
    return json.dumps(answer).encode() + b"\n"
