"""Where a push lands: is the receive-pack git starts for it one on this machine?

A push to a local path (or ``file://`` URL) runs ``git receive-pack`` in the target
repository, which the repository's config names (it may lie in its own working tree,
hooks and all), and git passes no ``-c`` setting to a local transport. So does a push
over ssh to this machine (``ssh://localhost/...``, ``git@127.0.0.1:...``, ``[::1]``,
this machine's own name or address): the sshd here starts that receive-pack as the
user, in whatever repository the path names. ``publish._push`` gives either one the
overrides on receive-pack's own command line (a network remote runs its own server's,
which is not this machine's to configure).

The rules for telling a URL's transport are git's own (transport.c, connect.c).
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_SSH_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git"})


def is_local(url: str) -> bool:
    """Whether git reaches ``url`` by starting receive-pack on this machine itself: a
    ``file://`` URL, or no ``scheme://``, ``helper::`` or ``host:`` prefix (a path,
    where a slash comes before any colon)."""
    scheme = _SCHEME.match(url)
    if scheme and url.startswith("::", scheme.end()):
        return False  # a remote helper (git-remote-NAME)
    if scheme and url.startswith("://", scheme.end()):
        return url.startswith("file://")
    colon, slash = url.find(":"), url.find("/")
    return colon < 0 or 0 <= slash < colon


def ssh_host(url: str) -> str | None:
    """The host an ssh URL (``ssh://[user@]host[:port]/path``, or git's scp-like
    ``[user@]host:path``, ``[host]:path``) connects to; None for any other URL."""
    scheme = _SCHEME.match(url)
    if scheme and url.startswith("::", scheme.end()):
        return None
    if scheme and url.startswith("://", scheme.end()):
        if scheme.group() not in _SSH_SCHEMES:
            return None
        authority = url[scheme.end() + 3 :].split("/", 1)[0]
        host = authority.rsplit("@", 1)[-1]
        if host.startswith("["):
            return host[1:].split("]", 1)[0]
        return host.split(":", 1)[0]
    if is_local(url):
        return None
    if url.startswith("["):  # [host]:path, [::1]:path, [user@host:port]:path
        inner = url[1:].split("]", 1)[0].rsplit("@", 1)[-1]
        return inner if inner.count(":") > 1 else inner.split(":", 1)[0]
    return url.split(":", 1)[0].rsplit("@", 1)[-1]


def reaches_this_machine(url: str) -> bool:
    """Whether ``url`` is an ssh URL whose host is this machine: a loopback or
    unspecified address in any spelling (``127.1``, ``0x7f000001``, ``::ffff:127.0.0.1``),
    ``localhost``, or a name or address this machine answers to (one a socket can be
    bound to here). The name is resolved as ssh would; one that does not resolve is
    not taken for this machine (the push then fails there anyway)."""
    host = ssh_host(url)
    if host is None:
        return False
    name = host.strip().rstrip(".").lower()
    if not name:
        return False
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return False
    return any(_ours(family, str(address[0])) for family, _, _, _, address in found)


def _ours(family: int, address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip, family = ip.ipv4_mapped, socket.AF_INET
    if ip.is_loopback or ip.is_unspecified:
        return True
    # An address of one of this machine's interfaces: binding to it succeeds only here
    # (nothing is sent anywhere).
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(ip), 0))
    except OSError as exc:
        return exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EINVAL)
    return True
