"""Protobuf's wire format for the messages of ``codex.code_mode.v1``, without protobuf's
runtime: the host's own encoder and decoder.

Why: importing protobuf and building the message classes was about a fifth of the
host's start, and Codex starts its host at a turn's first exec and waits for it. The
messages are few and flat (strings, bytes, integers, enums, nested messages, oneofs),
so the format is written out here from ``proto_file()``, field by field, as the
protobuf encoding rules say: a field's key is ``number << 3 | wire type``; integers
are varints; strings, bytes and messages are length-prefixed; a proto3 field without
``optional`` is left out when it holds its default; fields a message does not define
are skipped when read. ``tests/test_codex_host_codec.py`` checks every message both
ways against protobuf's own classes.

``pb.ToolCall(session_id=...)`` makes a message; reading a field that was not set gives
its default; ``HasField`` and ``WhichOneof`` answer as protobuf's do;
``pb.ToolCall.FromString(data)`` reads one (``DecodeError`` when it is not one) and
``message.SerializeToString()`` writes it.
"""

from __future__ import annotations

import struct
from typing import Any

from codemode.codex_host.proto_file import FieldDef, MessageDef, Method, proto_file

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MAX_DEPTH = 64
_DOUBLE = struct.Struct("<d")
_SIGNED = {"int64": 64, "int32": 32}
# How a field's value is written, by its type; and the wire type each way gives.
_INTEGER, _STRING, _BYTES, _DOUBLE_CODE, _MESSAGE = range(5)
_CODES = {"string": _STRING, "bytes": _BYTES, "double": _DOUBLE_CODE}
_CODES.update(dict.fromkeys(("bool", "uint64", "int64", "uint32", "int32"), _INTEGER))
_WIRE = {_INTEGER: _VARINT, _STRING: _LEN, _BYTES: _LEN, _DOUBLE_CODE: _I64, _MESSAGE: _LEN}


_new = object.__new__
_set = object.__setattr__


class DecodeError(ValueError):
    """The bytes are not an encoding of the message."""


class Message:
    """One message: the fields set on it, by name; the rest read as their defaults."""

    __slots__ = ("_type", "_values")
    _type: MessageType
    _values: dict[str, Any]

    def __init__(self, _type: MessageType, **fields: Any) -> None:
        object.__setattr__(self, "_type", _type)
        object.__setattr__(self, "_values", {})
        # Every nested call makes a message: the plain fields are set without the checks
        # ``__setattr__`` makes (a field's name is checked all the same).
        plain, values = _type.plain, self._values
        for name, value in fields.items():
            if name in plain:
                values[name] = value
            else:
                setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        f = self._type.by_name.get(name)
        if f is None:
            raise AttributeError(f"{self._type.name} has no field {name!r}")
        values = self._values
        if name in values:
            return values[name]
        if f.repeated:
            values[name] = []  # kept: appending to it changes the message
            return values[name]
        return self._type.default(f)

    def __setattr__(self, name: str, value: Any) -> None:
        f = self._type.by_name.get(name)
        if f is None:
            raise AttributeError(f"{self._type.name} has no field {name!r}")
        if f.repeated:
            value = list(value)
        if f.oneof is not None:
            for other in self._type.oneofs[f.oneof]:
                self._values.pop(other, None)
        self._values[name] = value

    def HasField(self, name: str) -> bool:
        if name in self._type.oneofs:
            return self.WhichOneof(name) is not None
        f = self._type.by_name.get(name)
        if f is None or f.repeated or (f.kind != "message" and not f.optional and not f.oneof):
            raise ValueError(f"{self._type.name}.{name} has no presence")
        return name in self._values

    def WhichOneof(self, oneof: str) -> str | None:
        for name in self._type.oneofs[oneof]:
            if name in self._values:
                return name
        return None

    def SerializeToString(self) -> bytes:
        out = bytearray()
        self._type.write(self, out)
        return bytes(out)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Message)
            and other._type is self._type
            and other.SerializeToString() == self.SerializeToString()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as protobuf's messages are

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{self._type.name}({shown})"


class MessageType:
    """``pb.ToolCall``: makes, reads and writes one message type."""

    def __init__(self, definition: MessageDef, types: dict[str, MessageType]) -> None:
        self.name = definition.name
        self.fields = sorted(definition.fields, key=lambda f: f.number)
        self.by_name = {f.name: f for f in self.fields}
        self.by_number = {f.number: f for f in self.fields}
        self.oneofs = {o: [f.name for f in self.fields if f.oneof == o] for o in definition.oneofs}
        self.plain = {f.name for f in self.fields if not f.repeated and f.oneof is None}
        # How each field is written: its name, its key's bytes, how its value is encoded,
        # whether it is repeated, and whether it is written when it holds its default.
        self._plan: list[tuple[str, bytes, int, bool, bool]] = []
        for f in self.fields:
            code = {"scalar": _CODES.get(f.type, _INTEGER), "enum": _INTEGER}.get(f.kind, _MESSAGE)
            key = _varint_bytes(f.number << 3 | _WIRE[code])
            always = f.optional or f.oneof is not None or f.kind == "message"
            self._plan.append((f.name, key, code, f.repeated, always))
        self._types = types

    def __call__(self, **fields: Any) -> Message:
        # ``Message(self, **fields)``, without passing the fields on once more (every
        # nested call makes two messages).
        message: Message = _new(Message)
        values: dict[str, Any] = {}
        _set(message, "_type", self)
        _set(message, "_values", values)
        plain = self.plain
        for name, value in fields.items():
            if name in plain:
                values[name] = value
            else:
                setattr(message, name, value)
        return message

    def default(self, f: FieldDef) -> Any:
        if f.kind == "message":
            return Message(self._types[f.type])  # not attached, as protobuf's reads
        if f.kind == "enum":
            return 0
        return {"string": "", "bytes": b"", "bool": False, "double": 0.0}.get(f.type, 0)

    # -- writing ---------------------------------------------------------------------------

    def write(self, message: Message, out: bytearray) -> None:
        values = message._values
        for name, key, code, repeated, always in self._plan:
            if name not in values:
                continue
            value = values[name]
            if repeated:
                for item in value:
                    self._write_one(name, key, code, item, out)
            elif not (always or value):
                continue
            elif code == _STRING:  # the common case, inline: every nested call has ten
                data = value.encode()
                out += key
                if len(data) < 0x80:
                    out.append(len(data))
                else:
                    _varint(out, len(data))
                out += data
            else:
                self._write_one(name, key, code, value, out)

    def _write_one(self, name: str, key: bytes, code: int, value: Any, out: bytearray) -> None:
        out += key
        if code == _STRING:
            data = value.encode()
        elif code == _BYTES:
            data = bytes(value)
        elif code == _INTEGER:
            number = int(value)
            if number < 0:
                number += 1 << 64  # negative int32/int64/enum values take ten bytes
            _varint(out, number)
            return
        elif code == _MESSAGE:
            f = self.by_name[name]
            if not isinstance(value, Message) or value._type.name != f.type:
                raise TypeError(f"{self.name}.{name} takes a {f.type}")
            inner = bytearray()
            value._type.write(value, inner)
            data = inner
        else:  # a double
            out += _DOUBLE.pack(value)
            return
        _varint(out, len(data))
        out += data

    # -- reading ---------------------------------------------------------------------------

    def FromString(self, data: bytes) -> Message:
        return self._read(memoryview(data), 0)

    def _read(self, data: memoryview, depth: int) -> Message:
        if depth > _MAX_DEPTH:
            raise DecodeError("messages nested too deeply")
        message: Message = _new(Message)
        values: dict[str, Any] = {}
        _set(message, "_type", self)
        _set(message, "_values", values)
        at, end = 0, len(data)
        while at < end:
            key = data[at]
            if key < 0x80:  # a field number under 16: the key is one byte
                at += 1
            else:
                key, at = _read_varint(data, at)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise DecodeError("field number 0")
            f = self.by_number.get(number)
            value: Any
            if wire == _VARINT:
                raw, at = _read_varint(data, at)
                if f is None:
                    continue
                self._check(f, wire)
                value = _integer(f, raw)
            elif wire == _LEN:
                length = data[at] if at < end else 0x80
                if length < 0x80:
                    at += 1
                else:
                    length, at = _read_varint(data, at)
                if at + length > end:
                    raise DecodeError("a field runs past the end of the message")
                chunk, at = data[at : at + length], at + length
                if f is None:
                    continue
                if f.type == "string" and f.oneof is None and not f.repeated:
                    try:  # the common case, inline: strings, set once
                        values[f.name] = str(chunk, "utf-8")
                    except UnicodeDecodeError:
                        raise DecodeError(f"{self.name}.{f.name} is not valid UTF-8") from None
                    continue
                if f.kind != "message" and f.type not in ("string", "bytes"):
                    if not f.repeated:
                        raise DecodeError(f"{self.name}.{f.name}: a wrong wire type")
                    items = _packed(f, chunk)  # a packed repeated number field
                    values.setdefault(f.name, []).extend(items)
                    continue
                value = self._decode_len(f, chunk, depth)
            elif wire in (_I64, _I32):
                size = 8 if wire == _I64 else 4
                if at + size > end:
                    raise DecodeError("a field runs past the end of the message")
                raw_bytes, at = bytes(data[at : at + size]), at + size
                if f is None:
                    continue
                if f.type != "double" or wire != _I64:
                    raise DecodeError(f"{self.name}.{f.name}: a wrong wire type")
                value = _DOUBLE.unpack(raw_bytes)[0]
            else:
                raise DecodeError(f"wire type {wire} is not supported")
            if f.repeated:
                values.setdefault(f.name, []).append(value)
                continue
            if f.oneof is not None:
                for other in self.oneofs[f.oneof]:
                    values.pop(other, None)
            if f.kind == "message" and f.name in values:
                # A message field seen twice: the two are merged, as protobuf does.
                value = _merge(values[f.name], value)
            values[f.name] = value
        return message

    def _check(self, f: FieldDef, wire: int) -> None:
        if f.kind == "message" or f.type in ("string", "bytes", "double"):
            raise DecodeError(f"{self.name}.{f.name}: a wrong wire type {wire}")

    def _decode_len(self, f: FieldDef, chunk: memoryview, depth: int) -> Any:
        if f.kind == "message":
            return self._types[f.type]._read(chunk, depth + 1)
        if f.type == "bytes":
            return bytes(chunk)
        try:
            return str(chunk, "utf-8")
        except UnicodeDecodeError:
            raise DecodeError(f"{self.name}.{f.name} is not valid UTF-8") from None


def _merge(old: Message, new: Message) -> Message:
    for name, value in new._values.items():
        f = old._type.by_name[name]
        if f.repeated:
            old._values.setdefault(name, []).extend(value)
        elif f.kind == "message" and name in old._values:
            old._values[name] = _merge(old._values[name], value)
        else:
            setattr(old, name, value)
    return old


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _varint(out, value)
    return bytes(out)


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise DecodeError("a varint runs past the end of the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >> 64:
                raise DecodeError("a varint longer than 64 bits")
            return value, at
        shift += 7
        if shift >= 70:
            raise DecodeError("a varint longer than ten bytes")


def _integer(f: FieldDef, raw: int) -> int | bool:
    if f.type == "bool":
        return raw != 0
    if f.type == "uint32":
        return raw & 0xFFFFFFFF
    bits = _SIGNED.get(f.type, 32 if f.kind == "enum" else 0)
    if bits:
        raw &= (1 << bits) - 1
        if raw >> (bits - 1):
            raw -= 1 << bits
    return raw


def _packed(f: FieldDef, chunk: memoryview) -> list[Any]:
    if f.type == "double":
        if len(chunk) % 8:
            raise DecodeError(f"{f.name}: a packed field of the wrong length")
        return [v for (v,) in _DOUBLE.iter_unpack(chunk)]
    items: list[Any] = []
    at = 0
    while at < len(chunk):
        raw, at = _read_varint(chunk, at)
        items.append(_integer(f, raw))
    return items


class _Messages:
    """``pb.ExecuteRequest`` and so on; ``pb.enums`` and ``pb.methods`` as read."""

    def __init__(self) -> None:
        parsed = proto_file()
        self.classes: dict[str, MessageType] = {}
        for definition in parsed.messages.values():
            self.classes[definition.name] = MessageType(definition, self.classes)
        # Attributes too: ``pb.ToolCall`` is then found without ``__getattr__``.
        self.__dict__.update(self.classes)
        self.enums: dict[str, dict[str, int]] = parsed.enums
        self.methods: dict[str, Method] = parsed.methods

    def __getattr__(self, name: str) -> MessageType:
        try:
            return self.classes[name]
        except KeyError:
            raise AttributeError(name) from None


pb = _Messages()
