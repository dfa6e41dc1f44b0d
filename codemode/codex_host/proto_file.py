"""The .proto file beside this package, read into plain data: messages, their fields,
enums and the service's methods.

The subset of proto3 the file uses: messages, ``oneof``, ``optional``, ``repeated``,
enums, one service, scalar types. Two readers build on it: ``proto_codec.py`` (the
host's own encoder and decoder, no protobuf runtime to import while Codex waits for
the host) and ``schema.py`` (protobuf's descriptors, for clients and for checking this
reading against what ``protoc`` makes of the same file).
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from codemode.process.package_data import read_text

PROTO_FILE = "codex.code_mode.v1.proto"
PACKAGE = "codex.code_mode.v1"
SERVICE = f"{PACKAGE}.CodeModeHost"
SCALARS = ("string", "bytes", "bool", "uint64", "int64", "uint32", "int32", "double")
_TOKEN = re.compile(r"[A-Za-z_][\w.]*|\d+|[{}();=<>,]")


# Named tuples, not dataclasses: the host reads this file as it starts (``model.py``).
class Method(NamedTuple):
    name: str
    request: str
    response: str
    server_streaming: bool


class FieldDef(NamedTuple):
    name: str
    number: int
    type: str  # a scalar's name (SCALARS), or a message's or an enum's
    kind: str  # "scalar", "enum" or "message"
    repeated: bool = False
    optional: bool = False  # proto3 `optional`: presence is tracked
    oneof: str | None = None  # the oneof it belongs to (not the synthetic ones)


class MessageDef(NamedTuple):
    name: str
    fields: list[FieldDef]
    oneofs: list[str]


class ProtoFile(NamedTuple):
    messages: dict[str, MessageDef]
    enums: dict[str, dict[str, int]]
    methods: dict[str, Method]


def _tokens(text: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"[^"]*"', "STRING", text)
    return _TOKEN.findall(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.at = 0
        # Enum names first: a field's type says enum or message only by its name.
        self.enums = {self.toks[i + 1] for i, t in enumerate(self.toks) if t == "enum"}

    def next(self) -> str:
        tok = self.toks[self.at]
        self.at += 1
        return tok

    def expect(self, want: str) -> None:
        got = self.next()
        if got != want:
            raise ValueError(f"{PROTO_FILE}: expected {want!r}, found {got!r}")

    def file(self) -> ProtoFile:
        out = ProtoFile({}, {}, {})
        while self.at < len(self.toks):
            tok = self.next()
            if tok in ("syntax", "package"):
                while self.next() != ";":
                    pass
            elif tok == "message":
                msg = self.message()
                out.messages[msg.name] = msg
            elif tok == "enum":
                name = self.next()
                out.enums[name] = self.enum()
            elif tok == "service":
                self.service(out.methods)
            else:
                raise ValueError(f"{PROTO_FILE}: unexpected {tok!r}")
        return out

    def message(self) -> MessageDef:
        msg = MessageDef(self.next(), [], [])
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok == "oneof":
                name = self.next()
                msg.oneofs.append(name)
                self.expect("{")
                while (inner := self.next()) != "}":
                    msg.fields.append(self.field(inner, oneof=name))
            else:
                msg.fields.append(self.field(tok))
        return msg

    def field(self, tok: str, oneof: str | None = None) -> FieldDef:
        repeated = optional = False
        if tok == "repeated":
            repeated, tok = True, self.next()
        elif tok == "optional":
            optional, tok = True, self.next()
        name = self.next()
        self.expect("=")
        number = int(self.next())
        self.expect(";")
        kind = "scalar" if tok in SCALARS else "enum" if tok in self.enums else "message"
        return FieldDef(name, number, tok, kind, repeated, optional, oneof)

    def enum(self) -> dict[str, int]:
        values: dict[str, int] = {}
        self.expect("{")
        while (tok := self.next()) != "}":
            self.expect("=")
            values[tok] = int(self.next())
            self.expect(";")
        return values

    def service(self, methods: dict[str, Method]) -> None:
        self.next()  # its name: SERVICE
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok != "rpc":
                raise ValueError(f"{PROTO_FILE}: unexpected {tok!r} in service")
            name = self.next()
            self.expect("(")
            request = self.next()
            self.expect(")")
            self.expect("returns")
            self.expect("(")
            response = self.next()
            streaming = response == "stream"
            if streaming:
                response = self.next()
            self.expect(")")
            self.expect(";")
            methods[name] = Method(name, request, response, streaming)


@cache
def proto_file() -> ProtoFile:
    return _Parser(read_text(__file__, PROTO_FILE)).file()
