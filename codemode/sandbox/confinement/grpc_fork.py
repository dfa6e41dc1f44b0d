"""gRPC's fork handlers, turned off in codemode's own processes.

gRPC (loaded by Ray, by an embedder's own code) registers
``pthread_atfork`` handlers when its fork support is on, as it is by default in
grpcio. A command confined with Landlock is started through a ``preexec_fn`` that forks
again (``process_tree.enter``); with those handlers in the way the child hung, or
aborted about one time in ten (exit 134), while gRPC had threads running. Turning the
support off (``GRPC_ENABLE_FORK_SUPPORT=0``, read when gRPC starts) removes the
handlers; codemode never uses gRPC across a fork, so it loses nothing.

``quiet_grpc_fork()`` runs before anything of codemode's can load gRPC: at the start of
the command line, and in the Ray workers' environment (``batch.ray_backend``). An
embedder whose process loads gRPC first should set the variable too (docs/sandbox.md).
"""

from __future__ import annotations

import os


def quiet_grpc_fork() -> None:
    """Turn gRPC's fork support off unless the environment already says otherwise."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
