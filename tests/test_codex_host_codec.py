"""The host's messages (``codex_host/wire/code_mode_pb2.py``, generated; ``messages.py``) and
what it checks before decoding one (``decode_budget.py``): the generated module is what
the .proto generates now, its classes are the ones ``protoc`` makes of the same file,
every message of the protocol passes the budget, and what is not a message, or holds
far more than any request does, is refused before it costs anything."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from codemode.codex_host.grpc.service import CodeModeHostService
from codemode.codex_host.session.runtime import SessionLimits
from codemode.codex_host.wire import decode_budget
from codemode.codex_host.wire.messages import SERVICE, pb
from tests.codex_host_support import generated

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(pb.classes)
_T = FieldDescriptor


def test_the_generated_module_is_what_the_proto_generates() -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools is not installed (the test extra)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_codex_messages.py"), "--check"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_classes_are_the_ones_protoc_makes_of_the_proto() -> None:
    theirs = generated().pb2
    # One file in protobuf's pool: the host's classes and a client's are the same.
    assert pb.file_descriptor is theirs.DESCRIPTOR
    assert all(pb.classes[name] is getattr(theirs, name) for name in NAMES)
    service = theirs.DESCRIPTOR.services_by_name["CodeModeHost"]
    assert service.full_name == SERVICE
    assert [m.name for m in service.methods] == list(pb.methods)
    assert pb.enums["ToolKind"]["TOOL_KIND_FREEFORM"] == theirs.TOOL_KIND_FREEFORM


def _scalar(field: Any, salt: int) -> Any:
    kind = field.type
    if kind == _T.TYPE_STRING:
        return f"{field.name}-{salt}-é\u2603"
    if kind == _T.TYPE_BYTES:
        return bytes([0, 255, salt % 256]) + b'{"a": 1}'
    if kind == _T.TYPE_BOOL:
        return True
    if kind == _T.TYPE_ENUM:
        return 2 if salt % 2 else 1
    if kind == _T.TYPE_DOUBLE:
        return 1.5 + salt
    return 300 + salt


def _fill(message: Any, salt: int, depth: int = 0, oneof_pick: int = 0) -> Any:
    """Every field set (a oneof: its ``oneof_pick``-th member), nested messages too."""
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and not oneof.name.startswith("_"):
            if oneof.fields[oneof_pick % len(oneof.fields)] is not field:
                continue
        if field.type == _T.TYPE_MESSAGE:
            if depth > 3:
                continue
            if field.is_repeated:
                for i in range(3):
                    _fill(getattr(message, field.name).add(), salt + i, depth + 1, i)
            else:
                _fill(getattr(message, field.name), salt, depth + 1, oneof_pick)
                getattr(message, field.name).SetInParent()
        elif field.is_repeated:
            getattr(message, field.name).extend([_scalar(field, salt), _scalar(field, salt + 1)])
        else:
            setattr(message, field.name, _scalar(field, salt))
    return message


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("pick", [0, 1, 2])
def test_every_message_of_the_protocol_is_within_the_budget(name: str, pick: int) -> None:
    cls = pb.classes[name]
    data = _fill(cls(), salt=pick, oneof_pick=pick).SerializeToString()
    decode_budget.check(data, decode_budget.plan(cls.DESCRIPTOR))


def _parse(method: str, data: bytes) -> Any:
    """What the service's deserializer makes of ``data`` as ``method``'s request."""
    return CodeModeHostService(SessionLimits()).methods()[f"/{SERVICE}/{method}"].deserialize(data)


def test_a_request_with_tools_and_unknown_fields_is_read() -> None:
    tools = [
        pb.ToolDefinition(name=f"t{i}", tool_name=pb.ToolName(name=f"t{i}")) for i in range(300)
    ]
    data = pb.ExecuteRequest(session_id="s", source="x", enabled_tools=tools).SerializeToString()
    unknown = bytes([15 << 3 | 0, 0x96, 0x01]) + bytes([14 << 3 | 2, 2]) + b"xy"
    read = _parse("Execute", data + unknown)
    assert read.session_id == "s" and len(read.enabled_tools) == 300


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


@pytest.mark.parametrize(
    ("what", "data"),
    [
        ("empty repeated entries", b"\x2a\x00" * (2 << 20)),
        ("unknown varints", b"\x78\x00" * (2 << 20)),
        ("fields inside the tools", b"\x2a" + _varint(4 << 20) + b"\x0a\x00" * (2 << 20)),
        ("unknown groups nested deep", b"\x7b" * (4 << 20)),
        ("tool names nested in tools", (b"\x2a\x02\x12\x00") * (1 << 20)),
    ],
)
def test_a_request_holding_far_more_than_any_does_is_refused_before_decoding(
    what: str, data: bytes
) -> None:
    started = time.process_time()
    refused = _parse("Execute", data)
    spent = time.process_time() - started
    assert refused.code.name == "RESOURCE_EXHAUSTED", what
    assert "was not read" in str(_bad(refused)), what
    assert spent < 0.5, f"{what}: {spent:.2f} s to refuse"


def _bad(refused: Any) -> str:
    from codemode.codex_host.grpc.service import _bad_body

    return _bad_body(refused)


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05ab",  # a string that runs past the end
        b"\x0a",  # a key and no length
        b"\x0a\x02\xff\xfe",  # a string that is not UTF-8
        b"\x0b",  # a group that never ends
        b"\x0c",  # a group's end without its start
        b"\x00\x01",  # field number 0
        b"\x10" + b"\xff" * 11,  # a varint longer than ten bytes
        b"\x0e",  # wire type 6
    ],
)
def test_what_is_not_a_message_is_refused_with_a_clear_status(data: bytes) -> None:
    refused = _parse("CloseSession", data)
    assert refused.code.name == "INVALID_ARGUMENT"
    assert _bad(refused).startswith("the request is not a valid protobuf message")


def test_an_rpc_the_proto_declares_and_the_service_does_not_serve_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A regenerated .proto (a newer Codex) may declare RPCs before they are served: the
    # host still starts, and the server answers them UNIMPLEMENTED as unknown paths.
    from codemode.codex_host.wire.messages import Rpc

    declared = dict(pb.methods)
    declared["GetFutureThing"] = Rpc("GetFutureThing", "CloseSessionRequest", "X", False)
    monkeypatch.setattr(pb, "methods", declared)
    served = CodeModeHostService(SessionLimits()).methods()
    assert f"/{SERVICE}/GetFutureThing" not in served
    assert f"/{SERVICE}/Execute" in served
