"""The messages and RPCs of ``codex.code_mode.v1``, as protobuf's runtime (upb, in C)
gives them from the generated ``wire/code_mode_pb2.py``.

``pb.ToolCall(...)`` makes a message, ``pb.classes[name]`` finds one by its proto name,
``pb.enums["ToolKind"]["TOOL_KIND_FUNCTION"]`` is an enum's number and ``pb.methods``
the service's RPCs in the order the .proto declares them. ``wire/code_mode_pb2.py`` is
generated from ``codex.code_mode.v1.proto`` by ``scripts/build_codex_messages.py``
(docs/codex-host.md); nothing here reads the .proto itself.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from codemode.codex_host.wire import code_mode_pb2

PACKAGE = "codex.code_mode.v1"
SERVICE = f"{PACKAGE}.CodeModeHost"


class Rpc(NamedTuple):
    """One RPC of the service, by its messages' proto names."""

    name: str
    request: str
    response: str
    server_streaming: bool


class _Messages:
    def __init__(self, module: Any) -> None:
        descriptor = module.DESCRIPTOR
        self.classes: dict[str, type[Any]] = {
            name: getattr(module, name) for name in descriptor.message_types_by_name
        }
        self.enums: dict[str, dict[str, int]] = {
            name: {value.name: value.number for value in enum.values}
            for name, enum in descriptor.enum_types_by_name.items()
        }
        service = descriptor.services_by_name[SERVICE.rsplit(".", 1)[1]]
        self.methods: dict[str, Rpc] = {
            m.name: Rpc(m.name, m.input_type.name, m.output_type.name, m.server_streaming)
            for m in service.methods
        }
        self.file_descriptor = descriptor

    def __getattr__(self, name: str) -> type[Any]:
        try:
            return self.classes[name]
        except KeyError:
            raise AttributeError(name) from None


pb = _Messages(code_mode_pb2)
