"""Where the host listens, parsed from ``--listen`` (``server.py`` says what each means).

Its own module, importing nothing heavy: the command line parses it before it starts
the engine worker and before asyncio and grpc load.
"""

from __future__ import annotations

from typing import NamedTuple


class Listen(NamedTuple):
    kind: str  # "tcp", "grpc-stdio" or "framed-stdio"
    host: str = ""
    port: int = 0


def parse_listen(value: str | None) -> Listen:
    if value in (None, "", "stdio", "stdio://"):
        return Listen("framed-stdio")
    if value in ("grpc+stdio://", "grpc+stdio"):
        return Listen("grpc-stdio")
    for prefix in ("grpc://", "http://", "tcp://"):
        if value.startswith(prefix):
            hostport = value[len(prefix) :].rstrip("/")
            host, sep, port = hostport.rpartition(":")
            if not sep or not port.isdigit() or not host:
                break
            return Listen("tcp", host.strip("[]"), int(port))
    raise ValueError(f"{value!r}: expected stdio, grpc+stdio:// or grpc://HOST:PORT")
