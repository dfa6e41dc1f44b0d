"""Commands confined with Landlock start reliably in a process that has gRPC loaded and
busy (the code-mode host, a Ray worker, an embedder): codemode turns gRPC's fork
handlers off (codemode.sandbox.confinement.grpc_fork). With them on, the child forked in the
``preexec_fn`` hung, or aborted about one time in ten."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import sys, subprocess, threading
    from concurrent import futures
    from codemode.sandbox.confinement.grpc_fork import quiet_grpc_fork
    if sys.argv[2] == "quiet":
        quiet_grpc_fork()
    import grpc
    from codemode.sandbox.server import process_tree

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stop = False

    def busy():  # gRPC threads at work in this process while it forks
        call = channel.unary_unary("/probe.Probe/Call")
        while not stop:
            try:
                call(b"", timeout=0.5)
            except grpc.RpcError:
                pass

    threading.Thread(target=busy, daemon=True).start()
    plan = process_tree.Plan.for_this_process()
    codes = [subprocess.run(["true"], preexec_fn=lambda: process_tree.enter(plan)).returncode
             for _ in range(int(sys.argv[1]))]
    stop = True
    print(" ".join(map(str, codes)))
    """
)


def test_landlock_children_start_beside_busy_grpc() -> None:
    pytest.importorskip("grpc", reason="grpcio is part of the full install")
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "60", "quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    codes = done.stdout.split()
    assert len(codes) == 60 and set(codes) == {"0"}, done.stdout
