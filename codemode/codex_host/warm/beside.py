"""Putting our host beside a Codex binary: a copy of Codex's vendor folder (hard links
where the file system allows, so no space is used) whose ``codex-code-mode-host`` is a
one-line shim that execs ``interpreter code-mode-host``. Codex starts the host from the
folder of its own binary, so running the copy's ``bin/codex`` runs our host.

With ``warm=True`` the shim runs ``warm_client`` (a small C program, copied beside it)
instead, which takes a host from a warm server when one runs and otherwise starts the
host as usual, leaving a server for the next session (``serve/warm_socket.py``); where no C
compiler is found the shim is the plain one."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path

HOST_NAME = "codex-code-mode-host"


CLIENT_NAME = "codemode-warm-client"


def shim_text(command: list[str], client: str | None = None, socket: str | None = None) -> str:
    if client is None or socket is None:
        return f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n'
    fallback = [*command, "--warm", socket]
    words = [client, socket, str(len(fallback)), *fallback]
    return f'#!/bin/sh\nexec {shlex.join(words)} "$@"\n'


def vendor_with_our_host(
    vendor: Path, dest: Path, command: list[str], *, warm: bool = False
) -> Path:
    """``dest``: a copy of ``vendor`` (the folder holding ``bin/codex``) with our host as
    its ``bin/codex-code-mode-host``. Made once; the shim is rewritten when it differs."""
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
    socket = None
    if client is not None:
        from codemode.codex_host.serve.warm_socket import socket_path

        socket = socket_path(command)
    text = shim_text(command, client, socket).encode()
    if not shim.exists() or shim.read_bytes() != text:
        # Unlinked first: it may be a hard link to Codex's own host, never written through.
        shim.unlink(missing_ok=True)
        shim.write_bytes(text)
        shim.chmod(0o755)
    return dest


def _place_client(target: Path) -> str | None:
    """``warm_client`` compiled (once per machine) and copied to ``target``, or None
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
