"""The host's HPACK decoder remembers repeated header blocks (``wire/header_blocks.py``):
it must answer exactly what hpack's own decoder answers for every block, whatever the
client does to the dynamic table, keep the header-list limit, and hold a bounded
amount; and the host's connections use it."""

from __future__ import annotations

import asyncio
import random
from unittest import mock

import hpack
import pytest
from h2.connection import H2Connection
from hpack import Decoder, Encoder, OversizedHeaderListError

from codemode.codex_host.wire import header_blocks
from codemode.codex_host.wire.h2_connection import Connection
from codemode.codex_host.wire.header_blocks import RepeatedBlocks

# What a gRPC client sends for a unary call, the path Huffman-coded and not indexed.
CALL = [
    (b":method", b"POST"), (b":scheme", b"http"),
    hpack.NeverIndexedHeaderTuple(b":path", b"/codex.code_mode.v1.CodeModeHost/CompleteToolCall"),
    (b"content-type", b"application/grpc"), (b"te", b"trailers"),
]  # fmt: skip


def _pair(limit: int = 1 << 16) -> tuple[Decoder, RepeatedBlocks]:
    plain = Decoder()
    plain.max_header_list_size = limit
    return plain, RepeatedBlocks(limit)


def test_a_repeated_block_is_answered_from_memory_with_the_same_headers() -> None:
    encoder = Encoder()
    opening = encoder.encode(CALL)  # the first call puts its indexable fields in the table
    block = encoder.encode(CALL)
    assert encoder.encode(CALL) == block  # the client's every later call: the same bytes
    decoder = RepeatedBlocks(1 << 16)
    decoder.decode(opening, raw=True)
    first = decoder.decode(block, raw=True)
    with mock.patch.object(Decoder, "decode", side_effect=AssertionError("decoded again")):
        again = decoder.decode(block, raw=True)
    assert again == first
    assert [type(h) for h in again] == [type(h) for h in first]  # never-indexed stays so
    assert isinstance(again[2], hpack.NeverIndexedHeaderTuple)
    assert again[2] == (b":path", b"/codex.code_mode.v1.CodeModeHost/CompleteToolCall")


def test_a_block_that_changes_the_table_is_decoded_every_time() -> None:
    block = Encoder().encode([(b"x-grows", b"each time")])  # a literal added to the table
    decoder = RepeatedBlocks(1 << 16)
    for n in range(1, 4):
        assert decoder.decode(block, raw=True) == [(b"x-grows", b"each time")]
        assert len(decoder.header_table.dynamic_entries) == n


def test_the_same_bytes_under_a_changed_table_mean_what_the_table_now_says() -> None:
    # A block of one indexed field (the newest dynamic entry): its meaning moves with
    # the table, and the decoder must follow, not answer what it meant before.
    plain, repeated = _pair()
    for value in (b"one", b"two", b"three"):
        adds = Encoder().encode([(b"x-entry", value)])
        for d in (plain, repeated):
            d.decode(adds, raw=True)
        newest = bytes([0x80 | 62])  # index 62: the first dynamic entry
        assert repeated.decode(newest, raw=True) == plain.decode(newest, raw=True)
        assert repeated.decode(newest, raw=True) == [(b"x-entry", value)]


def test_every_block_of_a_random_conversation_decodes_as_hpack_decodes_it() -> None:
    rng = random.Random(40)
    names = [b"x-a", b"x-b", b"content-type", b"grpc-timeout", b"x-long"]
    encoder = Encoder()
    plain, repeated = _pair()
    lists = [
        [(rng.choice(names), rng.choice([b"1", b"2", b"v" * rng.randint(0, 300)]))
         for _ in range(rng.randint(1, 6))]
        for _ in range(12)
    ]  # fmt: skip
    decodes = 0
    spy = mock.patch.object(Decoder, "decode", autospec=True, side_effect=Decoder.decode)
    with spy as underlying:
        for step in range(2000):
            decodes += _conversation_step(rng, encoder, lists, plain, repeated, step)
    # Both decoded every block, except those ``repeated`` answered from memory.
    remembered = 2 * decodes - underlying.call_count
    assert remembered > 200


def _conversation_step(
    rng: random.Random,
    encoder: Encoder,
    lists: list[list[tuple[bytes, bytes]]],
    plain: Decoder,
    repeated: RepeatedBlocks,
    step: int,
) -> int:
    if rng.random() < 0.02:  # the client resizes its table (a size update leads)
        encoder.header_table_size = rng.choice([0, 64, 256, 4096])
    block = encoder.encode(rng.choice(lists), huffman=rng.random() < 0.5)
    # A client may also send a block again as it is, whatever it does to the table
    # (later blocks may then name entries that are not there: both must fail alike).
    times = 2 if rng.random() < 0.3 else 1
    for _ in range(times):
        assert _outcome(repeated, block) == _outcome(plain, block), step
    assert list(repeated.header_table.dynamic_entries) == list(plain.header_table.dynamic_entries)
    return times


def _outcome(decoder: Decoder, block: bytes) -> object:
    try:
        return list(decoder.decode(block, raw=True))
    except hpack.HPACKError as exc:
        return type(exc), str(exc)


def test_the_header_list_limit_holds_for_a_remembered_block() -> None:
    decoder = RepeatedBlocks(1 << 16)
    # A literal never indexed: it leaves the table alone, so it is remembered.
    never = Encoder().encode([hpack.NeverIndexedHeaderTuple(b"x-big", b"v" * 200)])
    assert decoder.decode(never, raw=True) == [(b"x-big", b"v" * 200)]
    decoder.max_header_list_size = 100  # lowered (h2 does, as its settings are acked)
    with pytest.raises(OversizedHeaderListError):
        decoder.decode(never, raw=True)
    with pytest.raises(OversizedHeaderListError):  # and again: a failure is not kept
        decoder.decode(never, raw=True)


def test_what_is_kept_is_bounded() -> None:
    decoder = RepeatedBlocks(1 << 16)
    for n in range(5000):
        block = Encoder().encode([hpack.NeverIndexedHeaderTuple(b"x-n", str(n).encode())])
        decoder.decode(block, raw=True)
    big = Encoder().encode(
        [hpack.NeverIndexedHeaderTuple(b"x-big", b"v" * header_blocks.BLOCK_BYTES)]
    )
    many = Encoder().encode(
        [hpack.NeverIndexedHeaderTuple(b"x", b"")] * (header_blocks.HEADERS + 1)
    )
    decoder.decode(big, raw=True)
    decoder.decode(many, raw=True)
    kept = decoder._kept
    assert len(kept) == header_blocks.KEPT
    assert all(len(key[0]) <= header_blocks.BLOCK_BYTES for key in kept)  # type: ignore[arg-type]
    assert all(len(headers) <= header_blocks.HEADERS for headers in kept.values())


def test_the_hosts_connections_decode_with_it() -> None:
    async def made() -> Connection:
        return Connection({})

    connection = asyncio.run(made())
    assert isinstance(connection.h2.decoder, RepeatedBlocks)
    assert connection.h2.decoder.max_header_list_size == H2Connection().decoder.max_header_list_size
