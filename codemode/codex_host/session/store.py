"""A Codex session's ``store``: the values its programs keep for its later execs.

Codex's own host keeps them without a bound (it held 300 MB for one program that
stored in a loop); this one bounds what one session holds, in characters of keys and
values' JSON text, so a program cannot grow the host without end. The program's
``store()`` checks the bound first and throws a ``RangeError`` naming it
(``globals.js``), so nothing past it is ever sent; the host counts again here, as the
channel's other end, and keeps nothing that would pass it.
"""

from __future__ import annotations

import json
from typing import Any

STORE_CHARS = 16 * 1024 * 1024  # keys and values' JSON text, in characters


class Store:
    __slots__ = ("chars", "values")

    def __init__(self) -> None:
        self.values: dict[str, str] = {}  # key -> the value's JSON text
        self.chars = 0

    def keep(self, key: str, value_json: str) -> bool:
        """Keep ``value_json`` under ``key``; False (nothing changed) past the bound."""
        old = self.values.get(key)
        chars = self.chars - (len(key) + len(old) if old is not None else 0)
        chars += len(key) + len(value_json)
        if chars > STORE_CHARS:
            return False
        self.values[key] = value_json
        self.chars = chars
        return True

    def for_program(self) -> dict[str, Any]:
        """What an exec starts with: the values, their sizes and the bound."""
        return {
            "values": {k: json.loads(v) for k, v in self.values.items()},
            "sizes": {k: len(k) + len(v) for k, v in self.values.items()},
            "limit": STORE_CHARS,
        }
