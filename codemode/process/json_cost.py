"""What a JSON text would cost this process to decode, found before it is decoded.

JSON's decoder makes an object of every element, so a text's cost is its element count,
not its bytes (docs/threat-model.md, family 6): 64 MiB of ``[],[],...`` cost 8 s of CPU
and 2 GB of memory, where a string that size costs its bytes. Every server here that
decodes what a client sends (the code-mode host's framed protocol, the MCP server's and
ACP's stdio lines) asks ``elements_over`` first.

Every ``,``, ``[`` and ``{`` is an upper bound on the elements, counted at the bytes'
speed; only a text past the bound is scanned again with its strings skipped (a command's
output full of commas is one string), and that scan stops at the bound.
"""

from __future__ import annotations

import re

# Commas, brackets and braces outside strings: far above a real message (a tool list's
# schemas, a tool's JSON result: thousands), and what the decoder makes of that many
# stays about 20 MB and 0.2 s (counting them costs about as much again, at worst).
MAX_ELEMENTS = 200_000

# With escaped backslashes and quotes taken out, a string is a quote to the next quote:
# one match whatever its length.
_TOKEN = re.compile(rb'"[^"]*"|[,\[{]')


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
