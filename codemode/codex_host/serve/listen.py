"""Where the host listens, parsed from ``--listen`` (``serve/server.py`` says what each means).

Its own module, importing nothing heavy: the command line parses it before it starts
the engine worker and before asyncio and grpc load.
"""

from __future__ import annotations

from typing import NamedTuple

# The flag that lets TCP listen beyond loopback, named for what it gives away.
NETWORK_FLAG = "--allow-unauthenticated-network"


class Listen(NamedTuple):
    kind: str  # "tcp", "grpc-stdio" or "framed-stdio"
    host: str = ""
    port: int = 0


def parse_listen(value: str | None, *, beyond_loopback: bool = False) -> Listen:
    """``beyond_loopback``: a TCP address other than loopback is allowed (``NETWORK_FLAG``);
    without it one is refused here, before anything listens."""
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
            where = Listen("tcp", host.strip("[]"), int(port))
            if not beyond_loopback and not is_loopback(where.host):
                raise ValueError(
                    f"{value!r} is not a loopback address: anyone who can reach it could run "
                    f"programs here, unauthenticated. Listen on 127.0.0.1 or [::1], or pass "
                    f"{NETWORK_FLAG} to accept that risk"
                )
            return where
    raise ValueError(f"{value!r}: expected stdio, grpc+stdio:// or grpc://HOST:PORT")


def is_loopback(host: str) -> bool:
    """An IP literal in 127.0.0.0/8 or ::1, or ``localhost`` (names are not resolved:
    what a name means can change after the check)."""
    import ipaddress  # here: the stdio modes, which most starts are, never need it

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
