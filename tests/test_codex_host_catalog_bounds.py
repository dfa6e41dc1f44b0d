"""What a client's tool catalog revisions may make the host keep (docs/threat-model.md,
family 6: what one client can hold). A session keeps its last 8 revisions and a request
may carry 4 MiB of tools, so a client with a few sessions once made the host keep
hundreds of MiB it might name later; a connection's kept revisions are bounded in bytes
now, and an execute whose list would pass the bound is refused with RESOURCE_EXHAUSTED,
nothing kept."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from codemode.codex_host.session.catalog import KEPT, ToolCatalog, catalog_cost
from codemode.codex_host.session.limits import (
    CATALOGS_FOR_CLIENT,
    ConnectionCells,
    LimitReached,
)
from codemode.codex_host.session.model import ToolSpec
from tests.codex_host_support import CHANNEL_OPTIONS, HOST_PIDS, generated, host_process, texts

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

DESCRIPTION_BYTES = 3 << 20  # one tool of 3 MiB: well within a request's 4 MiB


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    with host_process("tcp", "quickjs") as address:
        yield address


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_kept_revisions_past_the_connections_bound_are_refused(host: str) -> None:
    gen = generated()
    pb2 = gen.pb2
    tool = pb2.ToolDefinition(
        name="big", tool_name=pb2.ToolName(name="big"), description="d" * DESCRIPTION_BYTES,
        kind=pb2.TOOL_KIND_FUNCTION,
    )  # fmt: skip
    pid = HOST_PIDS[host]
    before = _rss_mb(pid)
    async with grpc.aio.insecure_channel(host, options=CHANNEL_OPTIONS) as channel:
        stub = gen.grpc.CodeModeHostStub(channel)
        opened = []
        refused = None
        kept = 0
        for n in range(6):  # 6 sessions of 8 revisions of 3 MiB: 144 MiB asked
            events = stub.OpenSession(pb2.OpenSessionRequest())
            sid = (await events.read()).opened.session_id
            opened.append((sid, events))
            for revision in range(1, KEPT + 1):
                request = pb2.ExecuteRequest(
                    session_id=sid, execution_id=f"e{n}-{revision}", tool_call_id="c",
                    source="text(ALL_TOOLS.length);", enabled_tools=[tool],
                    catalog_revision=revision,
                )  # fmt: skip
                try:
                    [e async for e in stub.Execute(request)]
                    kept += 1
                except grpc.aio.AioRpcError as exc:
                    refused = exc
                    break
            if refused is not None:
                break
        assert refused is not None, f"{kept} revisions of 3 MiB kept, none refused"
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
        assert "tool catalog" in (refused.details() or ""), refused.details()
        assert kept * DESCRIPTION_BYTES <= CATALOGS_FOR_CLIENT
        # The refused revision was not kept: an execute naming it with no list has no tools.
        sid, _ = opened[-1]
        request = pb2.ExecuteRequest(
            session_id=sid, execution_id="named", tool_call_id="c",
            source="text(ALL_TOOLS.length);", catalog_revision=revision,
        )  # fmt: skip
        events = [e async for e in stub.Execute(request)]
        assert texts(events[-1].outcome) == ["0"]
        grown = _rss_mb(pid) - before
        assert grown < 2.5 * CATALOGS_FOR_CLIENT / (1 << 20), f"the host grew {grown:.0f} MiB"
        # A session that ends gives back what it kept: the revision fits now.
        first_sid, first_events = opened[0]
        await stub.CloseSession(pb2.CloseSessionRequest(session_id=first_sid))
        first_events.cancel()
        request.enabled_tools.append(tool)
        request.execution_id = "after-close"
        events = [e async for e in stub.Execute(request)]
        assert texts(events[-1].outcome) == ["1"]
        for _, events in opened[1:]:
            events.cancel()


def _spec(name: str, description: str = "", schema: object = None) -> ToolSpec:
    return ToolSpec(name=name, tool_name=name, description=description, input_schema=schema)


def test_a_catalog_counts_what_it_keeps_and_gives_it_back() -> None:
    account = ConnectionCells()
    catalog = ToolCatalog(account)
    one = [_spec("a", "x" * 1000)]
    catalog.tools(1, one)
    assert account.catalogs == catalog_cost(one) >= 1000
    catalog.tools(1, [_spec("b")])  # the same revision again: the old list goes
    assert account.catalogs == catalog_cost([_spec("b")])
    for revision in range(2, KEPT + 5):  # past KEPT: the oldest go, counted out
        catalog.tools(revision, one)
    assert account.catalogs == KEPT * catalog_cost(one)
    assert catalog.tools(KEPT + 4, []) == one  # named with no list: its tools
    catalog.clear()
    assert account.catalogs == 0


def test_a_framed_schema_counts_each_element_not_its_text() -> None:
    # The framed protocol keeps a tool's schema as the JSON value it decoded: a list of
    # empty objects is a few bytes a element in a frame and far more in this process.
    elements = 100_000
    cost = catalog_cost([_spec("t", schema=[{} for _ in range(elements)])])
    assert cost > elements * 50, cost


def test_a_revision_past_the_bound_is_refused_and_nothing_changes() -> None:
    account = ConnectionCells()
    catalogs = [ToolCatalog(account) for _ in range(4)]
    big = [_spec("big", "d" * (CATALOGS_FOR_CLIENT // 3))]
    catalogs[0].tools(1, big)
    catalogs[1].tools(1, big)
    with contextlib.suppress(LimitReached):
        catalogs[2].tools(1, big)
    held = account.catalogs
    with pytest.raises(LimitReached, match="tool catalog"):
        catalogs[3].tools(1, big)
    assert account.catalogs == held
    assert catalogs[3].tools(1, []) == []  # not kept
    catalogs[0].clear()
    assert catalogs[3].tools(1, big) == big  # room again
