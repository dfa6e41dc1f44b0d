"""HPACK (RFC 7541), as much as a gRPC server needs: decoding what a client sends
(indexed fields, literals, the dynamic table, Huffman strings) and encoding what the
server sends back as literals the decoder never has to remember (no indexing, no
Huffman), which every decoder accepts.

Everything decoded is untrusted: a bad block raises ``HpackError`` (the connection
then ends with COMPRESSION_ERROR, as HTTP/2 says), and nothing a peer sends can make
this process hold more than the table size it agreed to.
"""

from __future__ import annotations

from functools import cache

from codemode.process.package_data import read_text

MAX_TABLE_SIZE = 4096  # the protocol's default, which this server never raises
MAX_STRING = 1 << 16  # a header name or value longer than this is refused

# RFC 7541 Appendix A.
STATIC = (
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""),
    ("accept", ""), ("access-control-allow-origin", ""), ("age", ""), ("allow", ""),
    ("authorization", ""), ("cache-control", ""), ("content-disposition", ""),
    ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""),
    ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""),
    ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""),
    ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
    ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
)  # fmt: skip


class HpackError(Exception):
    """A header block this decoder cannot accept."""


@cache
def _huffman() -> tuple[dict[int, tuple[int, int, int]], list[int], int]:
    """``{length: (first code, its index in code order, how many)}``, the symbols in code
    order and the longest length: the canonical code hpack_huffman.txt's lengths define."""
    text = read_text(__file__, "hpack_huffman.txt")
    lengths = [
        int(n) for line in text.splitlines() if not line.startswith("#") for n in line.split()
    ]
    if len(lengths) != 257 or sum(2.0**-n for n in lengths) != 1.0:
        raise HpackError("hpack_huffman.txt must give 257 lengths of a complete code")
    symbols = sorted(range(257), key=lambda s: (lengths[s], s))
    codes: dict[int, tuple[int, int, int]] = {}
    code, previous = 0, lengths[symbols[0]]
    for i, sym in enumerate(symbols):
        if i:
            code = (code + 1) << (lengths[sym] - previous)
        previous = lengths[sym]
        first, index, count = codes.get(previous, (code, i, 0))
        codes[previous] = (first, index, count + 1)
    return codes, symbols, previous


_DECODED: dict[bytes, bytes] = {}  # a client sends the same few strings again and again


def huffman_decode(data: bytes) -> bytes:
    known = _DECODED.get(data)
    if known is not None:
        return known
    codes, symbols, longest = _huffman()
    out = bytearray()
    code = length = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            found = codes.get(length)
            if found is not None and 0 <= code - found[0] < found[2]:
                symbol = symbols[found[1] + code - found[0]]
                if symbol == 256:
                    raise HpackError("EOS inside a Huffman string")
                out.append(symbol)
                code = length = 0
            elif length >= longest:
                raise HpackError("invalid Huffman code")
    # What is left must be a prefix of EOS (all ones), shorter than a byte.
    if length >= 8 or code != (1 << length) - 1:
        raise HpackError("invalid Huffman padding")
    decoded = bytes(out)
    if len(data) <= 256 and len(_DECODED) < 256:
        _DECODED[data] = decoded
    return decoded


class Decoder:
    """One connection's decoding context (its dynamic table)."""

    def __init__(self) -> None:
        self.table: list[tuple[str, str]] = []  # newest first
        self.size = 0
        self.max_size = MAX_TABLE_SIZE

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        at, end = 0, len(block)
        while at < end:
            byte = block[at]
            if byte & 0x80:  # indexed field
                index, at = _integer(block, at, 7)
                headers.append(self._entry(index))
            elif byte & 0x40:  # literal, added to the table
                name, value, at = self._literal(block, at, 6)
                headers.append((name, value))
                self._add(name, value)
            elif byte & 0x20:  # table size update
                size, at = _integer(block, at, 5)
                if size > MAX_TABLE_SIZE:
                    raise HpackError(f"table size {size} is over {MAX_TABLE_SIZE}")
                self.max_size = size
                self._evict()
            else:  # literal without indexing / never indexed
                name, value, at = self._literal(block, at, 4)
                headers.append((name, value))
        return headers

    def _entry(self, index: int) -> tuple[str, str]:
        if 1 <= index <= len(STATIC):
            return STATIC[index - 1]
        dynamic = index - len(STATIC) - 1
        if index == 0 or dynamic >= len(self.table):
            raise HpackError(f"header index {index} is not in the table")
        return self.table[dynamic]

    def _literal(self, block: bytes, at: int, prefix: int) -> tuple[str, str, int]:
        index, at = _integer(block, at, prefix)
        if index:
            name = self._entry(index)[0]
        else:
            name, at = _string(block, at)
        value, at = _string(block, at)
        return name, value, at

    def _add(self, name: str, value: str) -> None:
        self.table.insert(0, (name, value))
        self.size += 32 + len(name) + len(value)
        self._evict()

    def _evict(self) -> None:
        while self.size > self.max_size and self.table:
            name, value = self.table.pop()
            self.size -= 32 + len(name) + len(value)


def _integer(block: bytes, at: int, prefix: int) -> tuple[int, int]:
    if at >= len(block):
        raise HpackError("truncated header block")
    mask = (1 << prefix) - 1
    value = block[at] & mask
    at += 1
    if value < mask:
        return value, at
    shift = 0
    while True:
        if at >= len(block) or shift > 28:
            raise HpackError("bad integer in a header block")
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _string(block: bytes, at: int) -> tuple[str, int]:
    if at >= len(block):
        raise HpackError("truncated header block")
    huffman = block[at] & 0x80
    length, at = _integer(block, at, 7)
    if length > MAX_STRING or at + length > len(block):
        raise HpackError("a header string runs past its block")
    raw = block[at : at + length]
    data = huffman_decode(raw) if huffman else raw
    return data.decode("latin-1"), at + length


def encode_integer(value: int, prefix: int, first: int = 0) -> bytes:
    mask = (1 << prefix) - 1
    if value < mask:
        return bytes([first | value])
    out = bytearray([first | mask])
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_literal(name: str, value: str) -> bytes:
    """A field as a literal without indexing, its name by static index where there is one."""
    raw = value.encode("latin-1", "replace")
    index = _STATIC_NAMES.get(name)
    if index is not None:
        head = encode_integer(index, 4)
    else:
        encoded = name.encode("latin-1")
        head = b"\x00" + encode_integer(len(encoded), 7) + encoded
    return head + encode_integer(len(raw), 7) + raw


_STATIC_NAMES: dict[str, int] = {}
for _i, (_name, _) in enumerate(STATIC, 1):
    _STATIC_NAMES.setdefault(_name, _i)
