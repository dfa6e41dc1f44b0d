"""The gRPC messages of ``codex.code_mode.v1`` as protobuf classes, built from the .proto
file beside this module (read by ``proto_file.py``).

The host itself encodes and decodes with ``proto_codec.py`` (protobuf's runtime is a
fifth of the host's start, which Codex waits for); this module is for clients (the
benchmark's) and for checking the reading of the .proto against ``protoc``: it turns
``proto_file()`` into a ``FileDescriptorProto`` and asks protobuf's runtime for the
message classes, in a private pool so a client generated from the same file can live
in the same process. ``tests/test_codex_host_grpc.py`` compares the result with what
``protoc`` makes of the file.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from codemode.codex_host.proto_file import (
    PACKAGE,
    PROTO_FILE,
    SERVICE,
    FieldDef,
    MessageDef,
    Method,
    proto_file,
)

__all__ = ["PACKAGE", "SERVICE", "Method", "file_descriptor", "pb"]

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL,
    "uint64": _F.TYPE_UINT64,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "int32": _F.TYPE_INT32,
    "double": _F.TYPE_DOUBLE,
}


def _message(msg: MessageDef, out: descriptor_pb2.DescriptorProto) -> None:
    out.name = msg.name
    for name in msg.oneofs:
        out.oneof_decl.add(name=name)
    synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
    for f in msg.fields:
        field = out.field.add()
        _field(f, field)
        if f.oneof is not None:
            field.oneof_index = msg.oneofs.index(f.oneof)
        if f.optional:
            synthetic.append(field)
    # proto3 `optional`: each such field sits alone in a synthetic oneof, declared after
    # the real ones (as protoc does).
    for field in synthetic:
        field.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=f"_{field.name}")


def _field(f: FieldDef, field: descriptor_pb2.FieldDescriptorProto) -> None:
    field.name = f.name
    field.number = f.number
    field.label = _F.LABEL_REPEATED if f.repeated else _F.LABEL_OPTIONAL
    if f.optional:
        field.proto3_optional = True
    field.json_name = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), f.name)
    if f.kind == "scalar":
        field.type = _SCALARS[f.type]
    else:
        field.type = _F.TYPE_ENUM if f.kind == "enum" else _F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{f.type}"


@cache
def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    parsed = proto_file()
    fdp = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, syntax="proto3")
    for msg in parsed.messages.values():
        _message(msg, fdp.message_type.add())
    for name, values in parsed.enums.items():
        enum = fdp.enum_type.add(name=name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)
    svc = fdp.service.add(name=SERVICE.rsplit(".", 1)[1])
    for m in parsed.methods.values():
        method = svc.method.add(
            name=m.name,
            input_type=f".{PACKAGE}.{m.request}",
            output_type=f".{PACKAGE}.{m.response}",
        )
        if m.server_streaming:
            method.server_streaming = True
    fdp.package = PACKAGE
    return fdp


class _Messages:
    """``pb.ExecuteRequest`` and so on: the message classes by their proto names."""

    def __init__(self) -> None:
        pool = descriptor_pool.DescriptorPool()
        fdp = file_descriptor()
        pool.Add(fdp)
        self.classes: dict[str, type[Any]] = {
            m.name: message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{PACKAGE}.{m.name}")
            )
            for m in fdp.message_type
        }
        self.enums = proto_file().enums
        self.methods = proto_file().methods

    def __getattr__(self, name: str) -> type[Any]:
        try:
            return self.classes[name]
        except KeyError:
            raise AttributeError(name) from None


pb = _Messages()
