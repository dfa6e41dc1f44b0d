"""Putting our host beside a Codex binary: a copy of Codex's vendor folder (hard links
where the file system allows, so no space is used) whose ``codex-code-mode-host`` is a
one-line shim that execs ``interpreter code-mode-host``. Codex starts the host from the
folder of its own binary, so running the copy's ``bin/codex`` runs our host.

With ``warm=True`` the host is the warm server's compiled client itself
(``codemode/warm/warm_client.c``, copied there; no shell in front of it), with its words
in ``codex-code-mode-host.args`` beside it: the server's socket, the installation's key
and the command. It hands the session to this user's warm server (docs/warm.md), whose
spare for a host has its engine worker booted, and where no server takes it, execs
``interpreter code-mode-host`` (the launcher, which goes warm by its standard library
client when warm starts are on, and leaves a server for the next session). Where no C
compiler is found the host is the plain shim, which goes warm the same way through the
launcher."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
from pathlib import Path

HOST_NAME = "codex-code-mode-host"
# The compiled client's words beside it (``warm_client.c``: its executable's name plus
# this).
WORDS_SUFFIX = ".args"


def shim_text(command: list[str]) -> str:
    """The plain shim: ``command`` "$@"."""
    return f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n'


def warm_words(host: Path) -> list[str] | None:
    """The words a warm host was given (the server's socket, the installation's key, the
    number of command words, the command), or None for the plain shim."""
    try:
        data = host.with_name(host.name + WORDS_SUFFIX).read_bytes()
    except FileNotFoundError:
        return None
    return [os.fsdecode(w) for w in data.split(b"\0")[:-1]]


def vendor_with_our_host(
    vendor: Path, dest: Path, command: list[str], *, warm: bool = False
) -> Path:
    """``dest``: a copy of ``vendor`` (the folder holding ``bin/codex``) with our host as
    its ``bin/codex-code-mode-host``. Made once; the shim is rewritten when it differs.

    ``warm``: the server's place and key are this process's (its environment's locale
    and Python variables, its installation); a Codex started otherwise reaches the
    server through the launcher instead, and an upgrade of codemode is served once the
    shim is written again.

    Raises ValueError, writing nothing, where the host's program is not named by an
    absolute path (the compiled client's exec would take it from the folder Codex runs
    in: the workspace), or where it, ``vendor`` or ``dest`` lies in a folder a confined
    command of this or an earlier session could have written (``writable-roots``)."""
    why = _refusal(vendor, dest, command)
    if why is not None:
        raise ValueError(why)
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
    host = dest / "bin" / HOST_NAME
    words = dest / "bin" / (HOST_NAME + WORDS_SUFFIX)
    client = _client() if warm else None
    if client is not None:
        from codemode.warm import place

        try:
            said = [place.socket_path(), place.facts(), str(len(command)), *command]
        except OSError:  # no private folder for a socket: the plain shim
            client = None
    if client is None:
        _put(host, shim_text(command).encode(), 0o755)
        words.unlink(missing_ok=True)
    else:
        # The words first: a host started meanwhile finds the new words or none.
        _put(words, b"".join(os.fsencode(w) + b"\0" for w in said), 0o644)
        _put(host, client, 0o755)
    return dest


def _refusal(vendor: Path, dest: Path, command: list[str]) -> str | None:
    from codemode.locations.host_programs import writable_root_of

    if not command or not os.path.isabs(command[0]):
        word = command[0] if command else ""
        return (f"the host's program must be an absolute path, not {word!r} (it would be "
                "looked up where Codex runs the host: the workspace)")  # fmt: skip
    for what, p in (("the host's program", command[0]), ("Codex's folder", str(vendor)),
                    ("the copy of Codex", str(dest))):  # fmt: skip
        root = writable_root_of(p)
        if root is not None:
            return (f"{what} {p} lies in {root}, which a confined command could have "
                    "written (codemode's writable-roots): not put beside Codex")  # fmt: skip
    return None


def _client() -> bytes | None:
    """The warm client compiled (once per machine), or None where no C compiler works."""
    from codemode.sandbox.helpers import compiled

    built = compiled.path("warm_client.c")
    return None if built is None else Path(built).read_bytes()


def _put(target: Path, data: bytes, mode: int) -> None:
    """``target`` holds ``data``: written whole under another name and renamed over it
    (never written through: it may be a hard link to one of Codex's own files)."""
    if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
        return
    # A new name of its own (O_EXCL: nothing planted there is followed), its mode set on
    # the descriptor.
    fd, building = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(building, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(building)
        raise
