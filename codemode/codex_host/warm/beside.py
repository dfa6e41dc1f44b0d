"""Putting our host beside a Codex binary: a copy of Codex's vendor folder (hard links
where the file system allows, so no space is used) whose ``codex-code-mode-host`` is a
one-line shim that execs ``interpreter code-mode-host``. Codex starts the host from the
folder of its own binary, so running the copy's ``bin/codex`` runs our host.

With ``warm=True`` the shim execs the warm server's compiled client
(``codemode/warm/warm_client.c``, copied beside it) instead: it hands the session to this
user's warm server (docs/warm.md), whose spare for a host has its engine worker booted,
and where no server takes it, execs ``interpreter code-mode-host`` (the launcher, which
goes warm by its standard library client when warm starts are on, and leaves a server
for the next session). Where no C compiler is found the shim is the plain one, which
goes warm the same way through the launcher."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path

HOST_NAME = "codex-code-mode-host"


CLIENT_NAME = "codemode-warm-client"


def shim_text(command: list[str], client: str | None = None, socket: str = "",
              key: str = "") -> str:  # fmt: skip
    """The shim: ``command`` "$@", or with ``client``, that client given the warm
    server's ``socket`` and installation ``key`` (``codemode.warm.place``)."""
    if client is None:
        return f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n'
    words = [client, socket, key, str(len(command)), *command]
    return f'#!/bin/sh\nexec {shlex.join(words)} "$@"\n'


def vendor_with_our_host(
    vendor: Path, dest: Path, command: list[str], *, warm: bool = False
) -> Path:
    """``dest``: a copy of ``vendor`` (the folder holding ``bin/codex``) with our host as
    its ``bin/codex-code-mode-host``. Made once; the shim is rewritten when it differs.

    ``warm``: the server's place and key are this process's (its environment's locale
    and Python variables, its installation); a Codex started otherwise reaches the
    server through the launcher instead, and an upgrade of codemode is served once the
    shim is written again."""
    if not (dest / "bin" / "codex").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
        try:
            try:
                shutil.copytree(vendor, building / "v", copy_function=os.link)
            except OSError:  # another file system: a real copy
                shutil.rmtree(building / "v", ignore_errors=True)
                shutil.copytree(vendor, building / "v")
            if not dest.exists():
                (building / "v").rename(dest)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    shim = dest / "bin" / HOST_NAME
    client = _place_client(dest / "bin" / CLIENT_NAME) if warm else None
    socket = key = ""
    if client is not None:
        from codemode.warm import place

        try:
            socket, key = place.socket_path(), place.facts()
        except OSError:  # no private folder for a socket: the plain shim
            client = None
    text = shim_text(command, client, socket, key).encode()
    if not shim.exists() or shim.read_bytes() != text:
        # Unlinked first: it may be a hard link to Codex's own host, never written through.
        shim.unlink(missing_ok=True)
        shim.write_bytes(text)
        shim.chmod(0o755)
    return dest


def _place_client(target: Path) -> str | None:
    """The warm client compiled (once per machine) and copied to ``target``, or None
    where no C compiler works."""
    from codemode.sandbox.helpers import compiled

    built = compiled.path("warm_client.c")
    if built is None:
        return None
    data = Path(built).read_bytes()
    if not target.exists() or target.read_bytes() != data:
        target.unlink(missing_ok=True)
        building = target.with_name(f".{target.name}.{os.getpid()}")
        building.write_bytes(data)
        building.chmod(0o755)
        building.replace(target)
    return str(target)
