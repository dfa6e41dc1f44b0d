"""``GetProcessMetrics`` against the host's own figures in /proc: a real host process, a
program that burns CPU in its engine worker, one that holds memory in another, and the
figures again after those workers were killed and reaped."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from tests.codex_host_support import HOST_PIDS, descendants, generated, host_process, session

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
METHOD = "/codex.code_mode.v1.CodeModeHost/GetProcessMetrics"
# CPU in the engine worker: a loop on the clock, no tool call, no output.
BURN = "const t = Date.now();\nwhile (Date.now() - t < 700) {}\ntext('burnt');\n"
# About 64 MB held in a living (yielded) worker.
HOLD = (
    "globalThis.held = 'x'.repeat(64 * 1024 * 1024);\n"
    "yield_control();\nawait new Promise((r) => setTimeout(r, 60000));\n"
)


class Stat(NamedTuple):
    own_cpu: float  # utime + stime, seconds
    reaped_cpu: float  # cutime + cstime: children waited for
    start_ticks: int
    rss: int  # bytes


def stat(pid: int) -> Stat:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    # rest[0] is field 3 (state): field N is rest[N - 3].
    return Stat(
        (int(rest[11]) + int(rest[12])) / TICKS,
        (int(rest[13]) + int(rest[14])) / TICKS,
        int(rest[19]),
        int(rest[21]) * PAGE,
    )


def boot_time() -> int:
    with open("/proc/stat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("btime "))


class Figures(NamedTuple):
    cpu: float  # the host and its workers, living and reaped
    rss: int  # the host and its living workers
    host_rss: int


def figures(pid: int) -> Figures:
    host = stat(pid)
    workers = []
    for child in descendants(pid):
        try:
            workers.append(stat(child))
        except (FileNotFoundError, ProcessLookupError):
            pass  # ended between the listing and the read
    return Figures(
        host.own_cpu + host.reaped_cpu + sum(w.own_cpu for w in workers),
        host.rss + sum(w.rss for w in workers),
        host.rss,
    )


@pytest.fixture(params=["tcp", "stdio"])
def host(request: pytest.FixtureRequest) -> Iterator[str]:
    with host_process(request.param, "quickjs") as address:
        yield address


async def metrics(channel: Any) -> Any:
    pb2 = generated().pb2
    call = channel.unary_unary(
        METHOD,
        request_serializer=pb2.GetProcessMetricsRequest.SerializeToString,
        response_deserializer=pb2.GetProcessMetricsResponse.FromString,
    )
    return await call(pb2.GetProcessMetricsRequest())


async def test_the_metrics_are_the_hosts_and_its_workers_living_and_reaped(host: str) -> None:
    pid = HOST_PIDS[host]
    async with grpc.aio.insecure_channel(host) as channel:
        first = await metrics(channel)
        assert first.process_id == pid
        started = boot_time() + stat(pid).start_ticks / TICKS
        assert abs(first.process_start_time_seconds - started) <= 1.5 / TICKS
        assert first.process_start_time_seconds <= time.time()

        async with session(channel) as client:
            _, burnt = await client.execute(BURN, yield_time_ms=30_000)
            assert burnt.WhichOneof("outcome") == "completed"
            _, held = await client.execute(HOLD, yield_time_ms=30_000)
            assert held.WhichOneof("outcome") == "yielded"
            before = figures(pid)
            during = await metrics(channel)
            after = figures(pid)
            # Between what /proc said just before and just after (a tick either side).
            assert before.cpu - 0.02 <= during.cpu_seconds_total <= after.cpu + 0.02
            # The burn's CPU is in it (most of its 0.7 s, on a machine not flooded).
            assert during.cpu_seconds_total >= first.cpu_seconds_total + 0.3
            low, high = sorted((before.rss, after.rss))
            assert 0.85 * low <= during.resident_memory_bytes <= 1.15 * high
            # The living worker's 64 MB are in it, not only the host's own pages.
            assert during.resident_memory_bytes >= before.host_rss + 48 * 1024 * 1024
        # The session is closed: its workers are killed and reaped; what they used stays.
        deadline = time.monotonic() + 10
        while descendants(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        later = await metrics(channel)
        assert later.cpu_seconds_total >= during.cpu_seconds_total - 0.02
        # And the memory they held does not.
        assert later.resident_memory_bytes < during.resident_memory_bytes - 48 * 1024 * 1024


async def test_a_malformed_metrics_request_gets_a_status_and_the_host_serves_on(
    host: str,
) -> None:
    async with grpc.aio.insecure_channel(host) as channel:
        raw = channel.unary_unary(
            METHOD, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await raw(b"\x0a\xff\xff\xff\xff\x0f")  # a length running off the end
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (await metrics(channel)).process_id == HOST_PIDS[host]
