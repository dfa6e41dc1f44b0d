"""The frames an engine worker and its parent exchange over a pipe.

A frame is a 5-byte header, ``<IB`` (payload length, op), then the payload. Text is
UTF-8 (``surrogatepass``: JavaScript strings may hold lone surrogates; the parent
turns them into U+FFFD once it has the text, ``state.py``).

Parent to worker, one request at a time, each answered by exactly one reply frame
(``STATE`` or ``ERROR``), with any number of ``LOG`` frames before it:

- ``OPEN``: a fresh isolate (the old one is dropped); the payload is the setup script.
- ``STEP``: evaluate a script, run its jobs, return the drained state.
- ``SETTLE``: pass finished tool calls (JSON text) to the isolate, then as ``STEP``.

And one that is not answered: ``PRIME`` (no payload), sent when a worker whose
program has ended waits idle for the next one: the worker drops its isolate and
evaluates the head of the next one's setup in a fresh isolate (``setup_head.py``), so
the next ``OPEN`` evaluates only the rest.

Worker to parent: ``LOG`` (one byte, the level's index, then the text; the last level
is not the console's but a host event's, ``[kind, data]`` as JSON, which shares the
console's path so that it keeps its place among the program's output), ``STATE`` (the
drained state, JSON text the program may have tampered with), ``ERROR`` (one byte of
kind, then the text), and ``STOPPED``, the answer to a stop request on the control
pipe, once the output printed so far has been sent.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct("<IB")

OPEN, STEP, SETTLE, PRIME = b"O"[0], b"S"[0], b"T"[0], b"P"[0]
LOG, STATE, ERROR, STOPPED = b"L"[0], b"D"[0], b"E"[0], b"X"[0]

# The prelude's LEVELS, same order: the console's, then the host channel's (``HOST``).
LEVELS = ("log", "info", "warn", "error", "debug", "host")
HOST = "host"
# ERROR kinds: the script threw, the isolate ran out of memory, the worker failed.
SCRIPT, MEMORY, INTERNAL = b"s"[0], b"m"[0], b"i"[0]


def frame(op: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), op) + payload


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes | memoryview) -> str:
    """Text from a frame; never raises (a worker is not trusted to send valid UTF-8)."""
    raw = data if type(data) is bytes else bytes(data)
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")
