"""`interpreter code-mode-host` over gRPC, driven by a client protoc generates from the
host's .proto: a real host process on TCP and on stdio (grpc+stdio://), both engines."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.codex_host_support import (
    HANG_UP,
    HOST_PIDS,
    INTERPRETER,
    descendants,
    free_port,
    generated,
    host_process,
    session,
    texts,
    wait_port,
)

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

HOSTS = [("tcp", "quickjs"), ("stdio", "quickjs"), ("tcp", "v8"), ("stdio", "v8")]


@pytest.fixture(scope="module")
def tcp_hosts() -> Iterator[dict[str, str]]:
    """One TCP host per engine for the module (each test opens its own session)."""
    with contextlib.ExitStack() as stack:
        yield {
            engine: stack.enter_context(host_process("tcp", engine)) for engine in ("quickjs", "v8")
        }


@pytest.fixture(params=HOSTS, ids=[f"{t}-{e}" for t, e in HOSTS])
def host(request: pytest.FixtureRequest, tcp_hosts: dict[str, str]) -> Iterator[str]:
    """A host's address. A stdio host serves one connection (its process's stdio, as
    Codex has it), so each test gets a fresh one."""
    transport, engine = request.param
    if transport == "tcp":
        yield tcp_hosts[engine]
        return
    with host_process(transport, engine) as address:
        yield address


def test_the_messages_the_host_serves_are_what_protoc_makes_of_the_proto() -> None:
    from google.protobuf import descriptor_pb2

    from codemode.codex_host.wire.messages import pb

    made = descriptor_pb2.FileDescriptorSet.FromString(generated().descriptor_set).file[0]
    made.ClearField("source_code_info")
    for message in made.message_type:  # protoc's --python_out leaves json_name out
        for field in message.field:
            field.ClearField("json_name")
    assert descriptor_pb2.FileDescriptorProto.FromString(pb.file_descriptor.serialized_pb) == made
    assert "YieldObservation" in pb.methods
    assert pb.ExecutionOutcome.DESCRIPTOR.fields_by_name["code_mode_host_duration_ns"].number == 6


async def test_nested_calls_go_to_the_client_and_their_results_come_back(host: str) -> None:
    def add(_name: str, args: Any) -> Any:
        return {"sum": args["a"] + args["b"]}

    async with session(host, add=add) as client:
        source = (
            "const rs = await Promise.all(\n"
            "  Array.from({length: 40}, (_, i) => tools.add({a: i, b: 1})));\n"
            "text(rs.map(r => r.sum).reduce((x, y) => x + y, 0));\n"
            "text({ok: true});\n"
        )
        started, outcome = await client.execute(source)
        assert outcome.WhichOneof("outcome") == "completed"
        assert not outcome.completed.HasField("error_text"), outcome.completed.error_text
        assert texts(outcome) == [str(sum(range(1, 41))), '{"ok":true}']
        assert outcome.cell_id == started.cell_id
        assert outcome.code_mode_host_duration_ns > 0
        assert len(client.calls) == 40
        assert sorted(c.sequence for c in client.calls) == list(range(1, 41))
        assert {c.execution_id for c in client.calls} == {started.execution_id}


async def test_image_notify_store_load_and_all_tools(host: str) -> None:
    async with session(host, lookup=lambda _n, a: a) as client:
        _, first = await client.execute(
            'image("data:image/png;base64,iVBORw0KGgo=", "high");\n'
            'notify("working on it");\n'
            'store("plan", {steps: [1, 2]});\n'
            'text(ALL_TOOLS.map(t => `${t.name}: ${t.description}`).join(";"));\n'
        )
        images = [i.image for i in first.content_items if i.WhichOneof("item") == "image"]
        assert [(i.image_url, i.detail) for i in images] == [
            ("data:image/png;base64,iVBORw0KGgo=", client.pb2.IMAGE_DETAIL_HIGH)
        ]
        assert texts(first) == ["lookup: the lookup tool"]
        event = await asyncio.wait_for(client.events.read(), 10)
        while event.WhichOneof("event") != "notification":
            event = await asyncio.wait_for(client.events.read(), 10)
        assert event.notification.text == "working on it"
        assert event.notification.call_id == "call-1"
        await client.stub.AcknowledgeNotification(
            client.pb2.AcknowledgeNotificationRequest(
                session_id=client.session_id, notification_id=event.notification.notification_id
            )
        )
        # A later exec of the same session (a fresh isolate) loads what the first stored.
        _, second = await client.execute(
            'text(load("plan").steps.length); text(String(load("missing")));'
        )
        assert texts(second) == ["2", "undefined"]


async def test_a_thrown_error_names_its_line_and_a_failing_tool_rejects(host: str) -> None:
    def broken(_name: str, _args: Any) -> Any:
        raise RuntimeError("disk on fire")

    async with session(host, broken=broken) as client:
        _, outcome = await client.execute(
            'text("before");\nconst x = 1;\nthrow new Error("boom-42");\n'
        )
        assert texts(outcome) == ["before"]
        error = outcome.completed.error_text
        assert error.startswith("Error: boom-42\n    at exec_main.mjs:3:"), error
        _, failed = await client.execute(
            "try { await tools.broken({}); } catch (e) { text(`caught: ${typeof e} ${e}`); }\n"
            "await tools.broken({});\n"
        )
        assert texts(failed) == ["caught: string disk on fire"]  # as in Codex: a bare string
        # Uncaught, the bare string is the error text (Codex's host shows it so).
        assert failed.completed.error_text == "disk on fire"


async def test_exit_ends_the_program_successfully(host: str) -> None:
    async with session(host) as client:
        _, outcome = await client.execute('text("a");\nexit();\ntext("b");\n')
        assert outcome.WhichOneof("outcome") == "completed"
        assert not outcome.completed.HasField("error_text")
        assert texts(outcome) == ["a"]


async def test_a_program_yields_and_wait_resumes_it(host: str) -> None:
    pb2 = generated().pb2
    async with session(host) as client:
        source = (
            'text("first");\n'
            "yield_control();\n"
            "await new Promise(r => setTimeout(r, 400));\n"
            'text("second");\n'
        )
        started, outcome = await client.execute(source, yield_time_ms=30_000)
        assert outcome.WhichOneof("outcome") == "yielded"
        assert texts(outcome) == ["first"]
        # A second observer of a cell already being waited on is refused, cleanly.
        wait = asyncio.ensure_future(
            client.stub.Wait(
                pb2.WaitRequest(
                    session_id=client.session_id, cell_id=started.cell_id, wait_id="w1",
                    yield_time_ms=30_000,
                )
            )
        )  # fmt: skip
        await asyncio.sleep(0.1)
        with pytest.raises(grpc.aio.AioRpcError) as busy:
            await client.stub.Wait(
                pb2.WaitRequest(session_id=client.session_id, cell_id=started.cell_id)
            )
        assert busy.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        done = await wait
        assert done.WhichOneof("state") == "live_cell"
        assert done.live_cell.WhichOneof("outcome") == "completed"
        assert texts(done.live_cell) == ["second"]
        # The cell is gone once its completion was reported.
        again = await client.stub.Wait(
            pb2.WaitRequest(session_id=client.session_id, cell_id=started.cell_id)
        )
        assert again.WhichOneof("state") == "missing_cell"


async def test_yield_time_from_the_request_and_terminate(host: str) -> None:
    pb2 = generated().pb2
    async with session(host) as client:
        source = 'text("up");\nwhile (true) { await new Promise(r => setTimeout(r, 20)); }\n'
        started, outcome = await client.execute(source, yield_time_ms=300)
        assert outcome.WhichOneof("outcome") == "yielded"
        # Its output so far (a busy machine may not have started it yet: then a wait).
        seen = texts(outcome)
        for _ in range(50):
            if seen:
                break
            more = await client.stub.Wait(
                pb2.WaitRequest(session_id=client.session_id, cell_id=started.cell_id,
                                yield_time_ms=300)
            )  # fmt: skip
            assert more.live_cell.WhichOneof("outcome") == "yielded"
            seen += texts(more.live_cell)
        assert seen == ["up"]
        stopped = await client.stub.Terminate(
            pb2.TerminateRequest(session_id=client.session_id, cell_id=started.cell_id)
        )
        assert stopped.live_cell.WhichOneof("outcome") == "terminated"
        gone = await client.stub.Terminate(
            pb2.TerminateRequest(session_id=client.session_id, cell_id=started.cell_id)
        )
        assert gone.WhichOneof("state") == "missing_cell"


async def test_yield_observation_ends_an_execute_early(host: str) -> None:
    pb2 = generated().pb2
    async with session(host) as client:
        request = pb2.ExecuteRequest(
            session_id=client.session_id, execution_id="exec-obs", tool_call_id="c",
            source='text("x"); await new Promise(r => setTimeout(r, 60000));',
            yield_time_ms=60_000,
        )  # fmt: skip
        stream = client.stub.Execute(request)
        started = await stream.read()
        await asyncio.sleep(0.2)
        await client.stub.YieldObservation(
            pb2.YieldObservationRequest(session_id=client.session_id, execution_id="exec-obs")
        )
        # Back long before the 60 s yield time, the cell still running.
        outcome = (await asyncio.wait_for(stream.read(), 30)).outcome
        assert outcome.WhichOneof("outcome") == "yielded"
        assert texts(outcome) in ([], ["x"])
        await client.stub.Terminate(
            pb2.TerminateRequest(session_id=client.session_id, cell_id=started.started.cell_id)
        )


async def test_bad_requests_get_a_status_and_disturb_nothing(host: str) -> None:
    pb2 = generated().pb2
    async with session(host, echo=lambda _n, a: a) as client:
        stub, sid = client.stub, client.session_id
        cases = [
            stub.Wait(pb2.WaitRequest(session_id="no-such-session", cell_id="1")),
            stub.Execute(pb2.ExecuteRequest(session_id="no-such-session", source="1")).read(),
            stub.CompleteToolCall(
                pb2.CompleteToolCallRequest(
                    session_id=sid, invocation_id="never-issued",
                    succeeded=pb2.ToolCallSucceeded(output_json=b"1"),
                )
            ),
            stub.CompleteToolCall(pb2.CompleteToolCallRequest(session_id=sid, invocation_id="x")),
        ]  # fmt: skip
        codes = []
        for call in cases:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            codes.append(err.value.code())
        assert codes == [
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT,
        ]
        missing = await stub.Wait(pb2.WaitRequest(session_id=sid, cell_id="999"))
        assert missing.WhichOneof("state") == "missing_cell"
        assert "not found" in missing.missing_cell.completed.error_text
        # The session still runs programs.
        _, outcome = await client.execute("text((await tools.echo({v: 7})).v);")
        assert texts(outcome) == ["7"]


async def test_malformed_protobuf_and_unknown_rpcs(host: str) -> None:
    async with grpc.aio.insecure_channel(host) as channel:
        raw = channel.unary_unary(
            "/codex.code_mode.v1.CodeModeHost/Wait",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await raw(b"\x0a\xff\xff\xff\xff\x0f")  # a length running off the end
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        unknown_rpc = channel.unary_unary(
            "/codex.code_mode.v1.CodeModeHost/GetProcessMetricsToo",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await unknown_rpc(b"")
        assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
        async with session(channel) as client:
            _, outcome = await client.execute('text("still here")')
            assert texts(outcome) == ["still here"]


async def test_a_client_that_disconnects_mid_call_leaves_the_host_serving(host: str) -> None:
    """TCP: the next client is served as usual. stdio (one connection, the process's
    stdio, as Codex has it): the host ends, cleanly."""
    async with session(host, slow=lambda _n, a: a) as client:
        client.hold.add("slow")
        # (stdio: the client goes while its call is unanswered: its stdin closes below)
        request = client.pb2.ExecuteRequest(
            session_id=client.session_id, execution_id="gone", tool_call_id="c",
            source="await tools.slow({}); text('never');", enabled_tools=client.definitions(),
        )  # fmt: skip
        stream = client.stub.Execute(request)
        await stream.read()
        for _ in range(100):
            if client.held:
                break
            await asyncio.sleep(0.05)
        assert client.held, "the tool call never reached the client"
    if host.startswith("unix:"):
        HANG_UP[host]()
        pid = HOST_PIDS[host]
        for _ in range(300):
            state = _process_state(pid)
            if state in (None, "Z"):
                break
            await asyncio.sleep(0.1)
        assert _process_state(pid) in (None, "Z"), "the stdio host outlived its stdin"
        return
    # The channel is closed with the call unanswered: a new client gets on as usual.
    async with session(host, echo=lambda _n, a: a) as client:
        _, outcome = await client.execute('text((await tools.echo({v: "ok"})).v)')
        assert texts(outcome) == ["ok"]


def _process_state(pid: int) -> str | None:
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        return None
    line = next(ln for ln in status.splitlines() if ln.startswith("State:"))
    return line.split()[1]


async def test_session_limits_cap_the_yield_time(host: str) -> None:
    import grpc as grpc_mod

    gen = generated()
    pb2 = gen.pb2
    async with grpc_mod.aio.insecure_channel(host) as channel:
        stub = gen.grpc.CodeModeHostStub(channel)
        limits = pb2.SessionCellExecutionLimits(max_yield_time_ms=200)
        events = stub.OpenSession(pb2.OpenSessionRequest(cell_execution_limits=limits))
        sid = (await events.read()).opened.session_id
        request = pb2.ExecuteRequest(
            session_id=sid, execution_id="e", tool_call_id="c", yield_time_ms=60_000,
            source="await new Promise(r => setTimeout(r, 30000));",
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        outcomes = [e async for e in stub.Execute(request)]
        assert outcomes[1].outcome.WhichOneof("outcome") == "yielded"
        assert loop.time() - t0 < 20  # capped at 0.2 s, not the 60 s asked for
        await stub.CloseSession(pb2.CloseSessionRequest(session_id=sid))
        with contextlib.suppress(grpc_mod.aio.AioRpcError):
            await stub.Wait(pb2.WaitRequest(session_id=sid, cell_id="1"))
        with pytest.raises(grpc_mod.aio.AioRpcError) as closed:
            await stub.Wait(pb2.WaitRequest(session_id=sid, cell_id="1"))
        assert closed.value.code() == grpc_mod.StatusCode.NOT_FOUND


async def test_programs_run_in_a_confined_engine_worker(host: str) -> None:
    """The program runs in a worker process below the host, under the seccomp filter and
    without the host's environment, as everywhere else in codemode."""
    pb2 = generated().pb2
    async with session(host) as client:
        source = (
            'text("up");\nyield_control();\n'
            "while (true) { await new Promise(r => setTimeout(r, 20)); }"
        )
        started, outcome = await client.execute(source, yield_time_ms=30_000)
        assert outcome.WhichOneof("outcome") == "yielded"
        try:
            confined = []
            for pid in descendants(HOST_PIDS[host]):
                with contextlib.suppress(OSError):
                    status = open(f"/proc/{pid}/status").read()
                    environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                    if "Seccomp:\t2" in status:
                        confined.append({e.split(b"=", 1)[0] for e in environ if e})
            assert confined, "no engine worker under the seccomp filter below the host"
            assert all(names <= {b"CODEMODE_WORKER_PATH"} for names in confined), confined
        finally:
            await client.stub.Terminate(
                pb2.TerminateRequest(session_id=client.session_id, cell_id=started.cell_id)
            )


async def test_the_grpc_host_needs_no_grpcio() -> None:
    """The host serves HTTP/2 through h2 and its messages through protobuf's runtime:
    with grpcio unimportable it serves a program with a nested call."""
    port = free_port()
    code = (
        "import sys\nsys.modules['grpc'] = None\nsys.modules['grpc_tools'] = None\n"
        "from codemode.cli import main\n"
        f"main(['code-mode-host', '--listen', 'grpc://127.0.0.1:{port}'])\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_port(port, proc)

        def add(_name: str, args: Any) -> Any:
            return {"sum": args["a"] + args["b"]}

        async with session(f"127.0.0.1:{port}", add=add) as client:
            _, outcome = await client.execute("text((await tools.add({a: 2, b: 3})).sum);")
            assert outcome.WhichOneof("outcome") == "completed", outcome
            assert texts(outcome) == ["5"]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err


def test_the_grpc_host_starts_without_what_it_does_not_need_to_answer() -> None:
    """Codex starts its host at a turn's first exec and waits for it: what the host's
    start imports is its cost. Kept out: grpcio (HTTP/2 is h2's, the messages
    protobuf's runtime's), importlib.resources and what it brings (tempfile, zipfile:
    data files are read directly), secrets (OpenSSL's hashing), and the command line
    with click (its options parse without it: ``codemode.launch.host``)."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", INTERPRETER, "code-mode-host",
         "--listen", "grpc+stdio://"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        proc.stdin.flush()
        first = proc.stdout.read(9)  # its SETTINGS frame's header: it is serving
        assert first[3] == 4, first
        proc.stdin.close()
        proc.wait(30)
        imported = {
            line.rsplit("|", 1)[-1].strip()
            for line in proc.stderr.read().decode().splitlines()
            if line.startswith("import time:")
        }
    finally:
        if proc.poll() is None:
            proc.kill()
    assert {"codemode.codex_host.wire.h2_connection", "codemode.js_runtime.session"} <= imported
    kept_out = {"grpc", "importlib.resources", "tempfile", "zipfile", "secrets", "click"}
    kept_out |= {"codemode.cli", "codemode.cli.root"}
    assert not kept_out & imported, kept_out & imported
