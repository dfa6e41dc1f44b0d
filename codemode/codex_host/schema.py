"""The gRPC messages of ``codex.code_mode.v1``, built from the .proto file beside this module.

The .proto text is the one definition (data, not code): this module reads the subset of
proto3 it uses (messages, ``oneof``, ``optional``, ``repeated``, enums, one service) into
a ``FileDescriptorProto`` and asks protobuf's runtime for the message classes, in a
private pool so a client generated from the same file can live in the same process.
No build step, no generated module to keep in step; ``tests/test_codex_host_grpc.py``
checks the result against what ``protoc`` makes of the same file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_FILE = "codex.code_mode.v1.proto"
PACKAGE = "codex.code_mode.v1"
SERVICE = f"{PACKAGE}.CodeModeHost"

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
_TOKEN = re.compile(r"[A-Za-z_][\w.]*|\d+|[{}();=<>,]")


@dataclass(frozen=True)
class Method:
    name: str
    request: str
    response: str
    server_streaming: bool


def proto_text() -> str:
    return resources.files("codemode.codex_host").joinpath(PROTO_FILE).read_text("utf-8")


def _tokens(text: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"[^"]*"', "STRING", text)
    return _TOKEN.findall(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.at = 0
        self.enums: set[str] = set()

    def next(self) -> str:
        tok = self.toks[self.at]
        self.at += 1
        return tok

    def expect(self, want: str) -> None:
        got = self.next()
        if got != want:
            raise ValueError(f"{PROTO_FILE}: expected {want!r}, found {got!r}")

    def file(self) -> descriptor_pb2.FileDescriptorProto:
        # Enum names first: a field's type says enum or message only by its name.
        self.enums = {self.toks[i + 1] for i, t in enumerate(self.toks) if t == "enum"}
        fdp = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, syntax="proto3")
        while self.at < len(self.toks):
            tok = self.next()
            if tok in ("syntax", "package"):
                while self.next() != ";":
                    pass
            elif tok == "message":
                self.message(fdp.message_type.add())
            elif tok == "enum":
                self.enum(fdp.enum_type.add())
            elif tok == "service":
                self.service(fdp.service.add())
            else:
                raise ValueError(f"{PROTO_FILE}: unexpected {tok!r}")
        fdp.package = PACKAGE
        return fdp

    def message(self, msg: descriptor_pb2.DescriptorProto) -> None:
        msg.name = self.next()
        self.expect("{")
        synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
        while (tok := self.next()) != "}":
            if tok == "oneof":
                index = len(msg.oneof_decl)
                msg.oneof_decl.add(name=self.next())
                self.expect("{")
                while (inner := self.next()) != "}":
                    self.field(msg.field.add(), inner, oneof=index)
            else:
                field = msg.field.add()
                self.field(field, tok)
                if field.proto3_optional:
                    synthetic.append(field)
        # proto3 `optional`: each such field sits alone in a synthetic oneof, declared
        # after the real ones (as protoc does).
        for field in synthetic:
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{field.name}")

    def field(self, field: descriptor_pb2.FieldDescriptorProto, tok: str, oneof: int = -1) -> None:
        label = _F.LABEL_OPTIONAL
        if tok == "repeated":
            label, tok = _F.LABEL_REPEATED, self.next()
        elif tok == "optional":
            field.proto3_optional = True
            tok = self.next()
        field.name = self.next()
        self.expect("=")
        field.number = int(self.next())
        self.expect(";")
        field.label = label
        field.json_name = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field.name)
        if tok in _SCALARS:
            field.type = _SCALARS[tok]
        else:
            field.type = _F.TYPE_ENUM if tok in self.enums else _F.TYPE_MESSAGE
            field.type_name = f".{PACKAGE}.{tok}"
        if oneof >= 0:
            field.oneof_index = oneof

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        enum.name = self.next()
        self.expect("{")
        while (tok := self.next()) != "}":
            self.expect("=")
            enum.value.add(name=tok, number=int(self.next()))
            self.expect(";")

    def service(self, svc: descriptor_pb2.ServiceDescriptorProto) -> None:
        svc.name = self.next()
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok != "rpc":
                raise ValueError(f"{PROTO_FILE}: unexpected {tok!r} in service")
            method = svc.method.add(name=self.next())
            self.expect("(")
            method.input_type = f".{PACKAGE}.{self.next()}"
            self.expect(")")
            self.expect("returns")
            self.expect("(")
            out = self.next()
            if out == "stream":
                method.server_streaming = True
                out = self.next()
            method.output_type = f".{PACKAGE}.{out}"
            self.expect(")")
            self.expect(";")


@cache
def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    return _Parser(proto_text()).file()


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
        self.enums = {e.name: {v.name: v.number for v in e.value} for e in fdp.enum_type}
        self.methods = {
            m.name: Method(
                m.name,
                m.input_type.rsplit(".", 1)[1],
                m.output_type.rsplit(".", 1)[1],
                m.server_streaming,
            )
            for m in fdp.service[0].method
        }

    def __getattr__(self, name: str) -> type[Any]:
        try:
            return self.classes[name]
        except KeyError:
            raise AttributeError(name) from None


pb = _Messages()
