"""What a Codex session queues for its client, attacked from the client's side: a
program that notifies in a loop while the client never reads its session's stream, one
that stores values without end, and a client that reads notifications but never
acknowledges them. The host's memory must stay bounded and the program be told
(docs/codex-host.md, "Bounds")."""

from __future__ import annotations

import asyncio

import pytest

from tests.codex_host_support import HOST_PIDS, host_process, session, texts

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

# The bounds docs/codex-host.md states.
QUEUED_NOTIFICATIONS = 4096
STORE_BYTES = 16 * 1024 * 1024


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1])


async def test_a_notify_loop_the_client_never_reads_keeps_the_host_bounded() -> None:
    """The client opens a session and never reads its event stream again; a program
    notifies 10 kB texts in a loop. The host queues a bounded number of notifications,
    its memory stays bounded, and the cell's report says how many were not sent."""
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        async with session(address) as client:
            before = _rss_kb(pid)
            source = (
                "const big = 'n'.repeat(10000);\n"
                "for (let i = 0; i < 40000; i++) {\n"
                "  notify(big);\n"
                "  if (i % 100 === 99) await new Promise((r) => setTimeout(r, 0));\n"
                "}\n"
                "text('went on');\n"
            )
            _, outcome = await asyncio.wait_for(client.execute(source), 120)
            grown = _rss_kb(pid) - before
            assert outcome.WhichOneof("outcome") == "completed"
            said = texts(outcome)
            assert said[0] == "went on"
            assert said[-1].startswith("[") and "notifications were not sent" in said[-1]
            assert grown < 150_000, f"the host grew by {grown} kB"


async def test_unacknowledged_notifications_are_remembered_up_to_the_bound() -> None:
    """A client that reads every notification and acknowledges none: the host keeps the
    newest ids only; an old one is NOT_FOUND, a recent one is acknowledged."""
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        async with session(address) as client:
            seen: list[str] = []

            async def read_events() -> None:
                while True:
                    event = await client.events.read()
                    if event.WhichOneof("event") == "notification":
                        seen.append(event.notification.notification_id)

            reader = asyncio.ensure_future(read_events())
            before = _rss_kb(pid)
            source = (
                f"for (let i = 0; i < {QUEUED_NOTIFICATIONS + 1000}; i++) {{\n"
                "  notify('n' + i);\n"
                "  if (i % 50 === 49) await new Promise((r) => setTimeout(r, 1));\n"
                "}\n"
            )
            await asyncio.wait_for(client.execute(source), 120)
            for _ in range(200):
                if len(seen) >= QUEUED_NOTIFICATIONS + 1000:
                    break
                await asyncio.sleep(0.05)
            assert len(seen) == QUEUED_NOTIFICATIONS + 1000
            pb2 = client.pb2
            await client.stub.AcknowledgeNotification(
                pb2.AcknowledgeNotificationRequest(
                    session_id=client.session_id, notification_id=seen[-1]
                )
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.stub.AcknowledgeNotification(
                    pb2.AcknowledgeNotificationRequest(
                        session_id=client.session_id, notification_id=seen[0]
                    )
                )
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            assert "notification" in (caught.value.details() or "")
            assert _rss_kb(pid) - before < 150_000
            reader.cancel()  # (cancelling a read ends the session's stream: only now)


async def test_a_store_loop_meets_the_bound_with_an_error_the_program_can_catch() -> None:
    """A program stores 100 kB values under new keys without end: past the session's
    bound store() throws a RangeError naming it, nothing past it is kept, the host's memory
    stays bounded, and replacing or removing a value makes room again."""
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        async with session(address) as client:
            before = _rss_kb(pid)
            source = (
                "const v = 'x'.repeat(100000);\n"
                "let i = 0;\n"
                "try { for (; i < 3000; i++) store('k' + i, v); text('all stored'); }\n"
                "catch (e) { text(`${e.name} at ${i}: ${e.message}`); }\n"
            )
            _, outcome = await asyncio.wait_for(client.execute(source), 120)
            said = texts(outcome)
            assert said[0].startswith("RangeError at 167: store(): ")
            assert "16 Mi" in said[0]
            assert _rss_kb(pid) - before < 200_000
            # Later execs see what was kept, and may replace a value within the bound.
            _, later = await client.execute(
                "text(String(load('k166') !== undefined) + ' ' + String(load('k167')));"
                "store('k0', 'small'); store('k167', 'fits now'); text(load('k167'));"
            )
            assert texts(later) == ["true undefined", "fits now"]


async def test_a_value_too_big_alone_is_refused() -> None:
    """One value past the bound on its own is refused at once; the session's stored
    values stay as they were."""
    with host_process("tcp", "quickjs") as address:
        async with session(address) as client:
            _, outcome = await client.execute(
                f"store('a', 1);\ntry {{ store('big', 'x'.repeat({STORE_BYTES})); }}\n"
                "catch (e) { text(e.name); }\ntext(JSON.stringify(load('big')));"
            )
            assert texts(outcome) == ["RangeError", "undefined"]
            _, later = await client.execute("text(String(load('a')) + String(load('big')));")
            assert texts(later) == ["1undefined"]
