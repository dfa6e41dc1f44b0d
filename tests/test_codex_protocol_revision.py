"""The revision of Codex's code-mode host protocol in ``codex.code_mode.v1.proto``, against
what Codex 0.171 (and 0.169) put on the wire: messages captured between Codex and its own
``codex-code-mode-host`` (tests/data/codex-0.171/; how they were taken is in
docs/codex-host.md, "Protocol revision").

Each captured gRPC message is read twice: by the host's own decoder (through the table of
methods its service serves, as a request arrives) and by the classes ``protoc`` generates
from the same .proto; the framed frames by the host's own frame reader."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from codemode.codex_host.framed.protocol import read_frame
from codemode.codex_host.grpc.service import CodeModeHostService
from codemode.codex_host.session.runtime import SessionLimits
from tests.codex_host_support import generated

DATA = Path(__file__).parent / "data" / "codex-0.171"
SERVICE = "/codex.code_mode.v1.CodeModeHost"
# The message each side of each RPC carries.
CLASSES = {
    ("OpenSession", "request"): "OpenSessionRequest",
    ("OpenSession", "response"): "SessionEvent",
    ("SubscribeToToolCalls", "request"): "SubscribeToToolCallsRequest",
    ("SubscribeToToolCalls", "response"): "ToolCall",
    ("Execute", "request"): "ExecuteRequest",
    ("Execute", "response"): "ExecuteEvent",
    ("Wait", "response"): "WaitResponse",
}


def captured(what: str, config: str = "default", codex: str = "0.171.0") -> dict[str, Any]:
    """The one captured message that ``what`` starts, Codex ``codex`` with ``config``."""
    found = [
        m
        for m in json.loads((DATA / "grpc.json").read_text())["messages"]
        if m["what"].startswith(what) and m["config"].startswith(config) and m["codex"] == codex
    ]
    assert len(found) == 1, (what, config, codex, len(found))
    return found[0]


def protoc_read(entry: dict[str, Any]) -> Any:
    cls = getattr(generated().pb2, CLASSES[entry["rpc"], entry["side"]])
    return cls.FromString(bytes.fromhex(entry["message"]))


def host_read(entry: dict[str, Any]) -> Any:
    """A request as the host's service decodes it when it arrives."""
    assert entry["side"] == "request"
    method = CodeModeHostService(SessionLimits()).methods()[f"{SERVICE}/{entry['rpc']}"]
    return method.deserialize(bytes.fromhex(entry["message"]))


def _unknown(message: Any) -> list[str]:
    """Fields of ``message`` (and of every message in it) that the .proto does not declare."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    found = [f"{message.DESCRIPTOR.name}.{f.field_number}" for f in UnknownFieldSet(message)]
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for sub in value if field.is_repeated else [value]:
            found += _unknown(sub)
    return found


def test_every_field_codex_sent_is_declared_and_reads_back_as_sent() -> None:
    entries = json.loads((DATA / "grpc.json").read_text())["messages"]
    assert len(entries) >= 15
    for entry in entries:
        message = protoc_read(entry)
        assert _unknown(message) == [], entry["what"]
        # Same bytes again: no field read with another type than Codex wrote it in.
        assert message.SerializeToString().hex() == entry["message"], entry["what"]


def test_open_session_carries_truncation_delegate_capacity_and_the_heartbeat() -> None:
    pb2 = generated().pb2
    default = captured("OpenSessionRequest")
    heartbeat = captured("OpenSessionRequest", "[code_mode] heartbeat_interval_s = 1")
    cut_off = captured("OpenSessionRequest", "[code_mode] heartbeat_interval_s = 3")
    for read in (protoc_read, host_read):
        plain, beating, untruncated = read(default), read(heartbeat), read(cut_off)
        assert plain.output_truncation == pb2.OUTPUT_TRUNCATION_SERVER
        assert plain.max_pending_delegate_calls == 4096
        assert not plain.HasField("heartbeat_interval_s")
        assert beating.heartbeat_interval_s == 1
        assert untruncated.output_truncation == pb2.OUTPUT_TRUNCATION_UNSPECIFIED
        assert untruncated.heartbeat_interval_s == 3
    older = protoc_read(captured("OpenSessionRequest", codex="0.169.0"))
    assert older.output_truncation == pb2.OUTPUT_TRUNCATION_SERVER
    assert older.max_pending_delegate_calls == 4096


def test_session_opened_says_truncation_and_catalog_revision() -> None:
    pb2 = generated().pb2
    opened = protoc_read(captured("SessionEvent: opened")).opened
    assert opened.output_truncation == pb2.OUTPUT_TRUNCATION_SERVER
    assert opened.supports_catalog_revision
    untruncated = protoc_read(
        captured("SessionEvent: opened", "[code_mode] heartbeat_interval_s = 3")
    ).opened
    assert untruncated.output_truncation == pb2.OUTPUT_TRUNCATION_UNSPECIFIED
    assert untruncated.supports_catalog_revision
    # 0.169's host: truncation, no catalog revision.
    older = protoc_read(captured("SessionEvent: opened", codex="0.169.0")).opened
    assert older.output_truncation == pb2.OUTPUT_TRUNCATION_SERVER
    assert not older.supports_catalog_revision


def test_heartbeats_arrive_on_the_tool_call_and_session_streams() -> None:
    config = "[code_mode] heartbeat_interval_s = 1"
    for read in (protoc_read, host_read):
        subscribe = read(captured("SubscribeToToolCallsRequest", config))
        assert subscribe.heartbeat_interval_s == 1
        assert not read(captured("SubscribeToToolCallsRequest")).HasField("heartbeat_interval_s")
    beat = protoc_read(captured("ToolCall: heartbeat", config))
    assert beat.HasField("heartbeat")
    assert beat.session_id and not beat.invocation_id and not beat.HasField("input_json")
    event = protoc_read(captured("SessionEvent: heartbeat", config))
    assert event.WhichOneof("event") == "heartbeat"


def test_a_second_execute_names_the_catalog_revision_instead_of_the_tools() -> None:
    config = "[code_mode] heartbeat_interval_s = 1"
    for read in (protoc_read, host_read):
        first = read(captured("ExecuteRequest: the session's first", config))
        second = read(captured("ExecuteRequest: the session's second", config))
        assert first.catalog_revision == 1 and len(first.enabled_tools) == 1
        assert second.catalog_revision == 1 and len(second.enabled_tools) == 0
        assert second.max_output_tokens == 60


def test_results_carry_the_buffered_time_and_the_host_cut_output() -> None:
    config = "[code_mode] heartbeat_interval_s = 1"
    wait = captured("WaitResponse", config)
    assert ["codex-code-mode-result-buffered-for-ns", "0"] in wait["headers"]
    assert protoc_read(wait).live_cell.WhichOneof("outcome") == "completed"
    cut = protoc_read(captured("ExecuteEvent: an outcome the host cut", config)).outcome
    assert cut.content_items[0].text.text.startswith("Warning: truncated output")


def _frames(name: str) -> list[Any]:
    async def read_all() -> list[Any]:
        reader = asyncio.StreamReader()
        reader.feed_data((DATA / name).read_bytes())
        reader.feed_eof()
        frames = []
        while (frame := await read_frame(reader)) is not None:
            frames.append(frame)
        return frames

    return asyncio.run(read_all())


def test_the_framed_protocol_offers_catalog_revisions_and_a_sixth_execute_field() -> None:
    hello, open_session, first, second = _frames("framed-client.bin")
    assert "tool-catalog-revision-v1" in hello["optionalCapabilities"]
    assert "bounded-output-v1" in hello["optionalCapabilities"]
    assert open_session["request"]["outputTruncation"] == "server"
    first_fields = first["request"]["request"]
    assert set(first_fields) == {
        "catalog_revision", "tool_call_id", "enabled_tools", "source", "yield_time_ms",
        "max_output_tokens",
    }  # fmt: skip
    assert first_fields["catalog_revision"] == 1 and first_fields["enabled_tools"]
    assert second["request"]["request"]["catalog_revision"] == 1
    assert second["request"]["request"]["enabled_tools"] == []
    ready, _opened, _started, result = _frames("framed-host.bin")
    assert "tool-catalog-revision-v1" in ready["capabilities"]
    outcome = result["result"]["value"]["Result"]
    assert outcome["result_buffered_for_ns"] == 0
    assert isinstance(outcome["code_mode_host_duration_ns"], int)


@pytest.mark.parametrize("name", ["framed-client.bin", "framed-host.bin"])
def test_the_frames_kept_name_no_local_path(name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8", errors="replace")
    assert "/tmp/" not in text and "/root" not in text and "/home/" not in text
