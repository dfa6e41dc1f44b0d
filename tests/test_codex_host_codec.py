"""The host's own protobuf encoder and decoder (``codex_host/proto_codec.py``) against
protobuf's classes that ``protoc`` generates from the same .proto: every message, every
field, both ways, byte for byte; and what is not a message is refused."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from codemode.codex_host.proto_codec import DecodeError, Message, pb
from codemode.codex_host.proto_file import proto_file
from tests.codex_host_support import generated

NAMES = sorted(proto_file().messages)
_T = FieldDescriptor


def _scalar(field: Any, salt: int) -> Any:
    kind = field.type
    if kind == _T.TYPE_STRING:
        return f"{field.name}-{salt}-é\u2603"
    if kind == _T.TYPE_BYTES:
        return bytes([0, 255, salt % 256]) + b'{"a": 1}'
    if kind == _T.TYPE_BOOL:
        return True
    if kind == _T.TYPE_UINT64:
        return (1 << 64) - 1 - salt
    if kind == _T.TYPE_ENUM:
        return 2 if salt % 2 else 1
    if kind in (_T.TYPE_INT64, _T.TYPE_INT32):
        return -5 - salt
    if kind == _T.TYPE_UINT32:
        return 300 + salt
    if kind == _T.TYPE_DOUBLE:
        return 1.5 + salt
    raise AssertionError(f"no value for {field.name}")


def _fill(message: Any, salt: int, depth: int = 0, oneof_pick: int = 0) -> Any:
    """Every field set (a oneof: its ``oneof_pick``-th member), nested messages too."""
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and not oneof.name.startswith("_"):
            if oneof.fields[oneof_pick % len(oneof.fields)] is not field:
                continue
        if field.type == _T.TYPE_MESSAGE:
            if depth > 3:
                continue
            if field.is_repeated:
                for i in range(2):
                    _fill(getattr(message, field.name).add(), salt + i, depth + 1, i)
            else:
                _fill(getattr(message, field.name), salt, depth + 1, oneof_pick)
                getattr(message, field.name).SetInParent()
        elif field.is_repeated:
            getattr(message, field.name).extend([_scalar(field, salt), _scalar(field, salt + 1)])
        else:
            setattr(message, field.name, _scalar(field, salt))
    return message


def _theirs(name: str) -> Any:
    return getattr(generated().pb2, name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("pick", [0, 1, 2])
def test_every_message_reads_and_writes_as_protobuf_does(name: str, pick: int) -> None:
    full = _fill(_theirs(name)(), salt=pick, oneof_pick=pick)
    data = full.SerializeToString(deterministic=True)
    ours = pb.classes[name].FromString(data)
    assert ours.SerializeToString() == data
    assert _theirs(name).FromString(ours.SerializeToString()) == full
    for field in full.DESCRIPTOR.fields:
        if field.has_presence:
            assert ours.HasField(field.name) == full.HasField(field.name), field.name
        if field.type not in (_T.TYPE_MESSAGE,) and not field.is_repeated:
            assert getattr(ours, field.name) == getattr(full, field.name), field.name
    for oneof in full.DESCRIPTOR.oneofs:
        if not oneof.name.startswith("_"):
            assert ours.WhichOneof(oneof.name) == full.WhichOneof(oneof.name)


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_message_reads_as_defaults(name: str) -> None:
    empty = _theirs(name)()
    ours = pb.classes[name].FromString(b"")
    assert ours.SerializeToString() == b""
    for field in empty.DESCRIPTOR.fields:
        if field.is_repeated:
            assert list(getattr(ours, field.name)) == []
        elif field.type == _T.TYPE_MESSAGE:
            assert isinstance(getattr(ours, field.name), Message)
            assert not ours.HasField(field.name)
        else:
            assert getattr(ours, field.name) == getattr(empty, field.name), field.name


def test_messages_made_here_are_what_protobuf_reads() -> None:
    call = pb.ToolCall(
        session_id="s",
        invocation_id="i",
        tool_name=pb.ToolName(name="exec_command"),
        tool_kind=pb.enums["ToolKind"]["TOOL_KIND_FREEFORM"],
        sequence=7,
        input_json=b"",  # optional: written though empty
    )
    theirs = _theirs("ToolCall").FromString(call.SerializeToString())
    assert theirs.HasField("input_json") and theirs.input_json == b""
    assert not theirs.HasField("traceparent")
    assert (theirs.session_id, theirs.tool_name.name, theirs.sequence) == ("s", "exec_command", 7)
    assert not theirs.tool_name.HasField("namespace")
    outcome = pb.ExecutionOutcome(cell_id="1", completed=pb.ExecutionCompleted())
    outcome.content_items.append(pb.ContentItem(text=pb.TextContent(text="hi")))
    read = _theirs("ExecutionOutcome").FromString(outcome.SerializeToString())
    assert read.WhichOneof("outcome") == "completed"
    assert not read.completed.HasField("error_text")
    assert [i.text.text for i in read.content_items] == ["hi"]
    # Setting a oneof's member clears the one set before, as protobuf does.
    outcome.yielded = pb.ExecutionYielded()
    assert outcome.WhichOneof("outcome") == "yielded"


def test_fields_this_side_does_not_know_are_skipped() -> None:
    known = _theirs("CloseSessionRequest")(session_id="abc").SerializeToString()
    unknown = (
        bytes([15 << 3 | 0, 0x96, 0x01])  # varint
        + bytes([14 << 3 | 2, 2]) + b"xy"  # length-delimited
        + bytes([13 << 3 | 5]) + b"\x01\x02\x03\x04"  # 32-bit
        + bytes([12 << 3 | 1]) + b"\x00" * 8  # 64-bit
    )  # fmt: skip
    assert pb.CloseSessionRequest.FromString(unknown + known).session_id == "abc"


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05ab",  # a string that runs past the end
        b"\x0a",  # a key and no length
        b"\x0a\x02\xff\xfe",  # a string that is not UTF-8
        b"\x08\x01",  # session_id (a string) sent as a varint
        b"\x0b",  # wire type 3 (groups)
        b"\x00\x01",  # field number 0
        b"\x10" + b"\xff" * 11,  # a varint longer than ten bytes
    ],
)
def test_what_is_not_a_message_is_refused_with_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        pb.CloseSessionRequest.FromString(data)
