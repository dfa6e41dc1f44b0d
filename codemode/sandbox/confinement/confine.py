"""Starting a subprocess confined according to the sandbox mode.

``danger-full-access`` starts it as it is. The restricted modes use bubblewrap (plus the
seccomp filter) when it works here, otherwise Landlock plus seccomp in the child. When
neither works the command is refused with a message naming what is missing: a restricted
mode never silently runs a command unconfined.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from codemode.sandbox.confinement import bwrap, landlock, seccomp, unix_sockets
from codemode.sandbox.helpers import compiled
from codemode.sandbox.server import pidfd_process, server_launch
from codemode.sandbox.server.command_servers import CommandServers
from codemode.sandbox.server.pidfd_process import ChildProcess
from codemode.sandbox.server.server_handle import CoversChanged, ServerUnavailable
from codemode.sandbox.server.server_key import ServerKey

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings


class ConfinementUnavailable(RuntimeError):
    """A restricted sandbox mode was asked for but nothing here can enforce it."""


@dataclass(frozen=True)
class Backends:
    """What works on this machine; each field is None when it works, else why not."""

    bubblewrap: str | None
    landlock: str | None
    seccomp: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"bubblewrap": self.bubblewrap, "landlock": self.landlock, "seccomp": self.seccomp}


_probe_lock = threading.Lock()


def probe() -> Backends:
    """Find out which confinement backends work here: bubblewrap once per process for
    the same programs (``bwrap.available``), the kernel's and libseccomp's answers once."""
    with _probe_lock:  # a session's warm-up thread may be probing: wait for its answer
        found = Backends(bwrap.available(), *_kernel())
        if found.bubblewrap is None:
            _command_server_helper(str(compiled.helpers_dir()))
        return found


@functools.cache
def _kernel() -> tuple[str | None, str | None]:
    return landlock.available(), seccomp.available()


@functools.lru_cache(maxsize=4)
def _command_server_helper(helpers: str) -> None:
    """The command server's helper, compiled once per machine: here, before any command,
    so that the helpers folder is there (and protected) from the first. Once per process
    and helpers folder (``probe`` is asked before every command)."""
    compiled.path("subreaper.c")


BackendName = Literal["none", "bubblewrap", "landlock"]


@dataclass(frozen=True)
class BackendChoice:
    """How commands are confined under some settings, and why: the one decision, made by
    ``decide_backend`` for the session and for ``spawn_confined`` alike."""

    name: BackendName
    # why each backend tried before ``name`` does not work here (in the order tried)
    passed_over: tuple[str, ...] = ()
    # the seccomp filter is added (a restricted mode, ``seccomp`` on, and it works here)
    seccomp: bool = False

    def to_json(self) -> dict[str, object]:
        return {"backend": self.name, "passed_over": list(self.passed_over),
                "seccomp": self.seccomp}  # fmt: skip


def decide_backend(settings: SandboxSettings) -> BackendChoice:
    """bubblewrap, Landlock or none for ``settings`` on this machine (``settings.backend``
    says which may be tried; ``auto``: bubblewrap first); raises ConfinementUnavailable
    naming why each does not work when a restricted mode has none."""
    if not settings.restricted:
        return BackendChoice("none")
    found = probe()
    seccomp_ok = settings.seccomp and found.seccomp is None
    wanted = settings.backend
    reasons: list[str] = []
    if wanted in ("auto", "bubblewrap"):
        if found.bubblewrap is None:
            return BackendChoice("bubblewrap", tuple(reasons), seccomp_ok)
        reasons.append(found.bubblewrap)
    if wanted in ("auto", "landlock"):
        network_ok = settings.network_access or seccomp_ok or landlock.abi_version() >= 4
        if found.landlock is not None:
            reasons.append(found.landlock)
        elif settings.allow_unix_sockets:
            # Landlock has no rule for connecting to a socket file: every socket of the
            # user would be reachable, not only the listed ones
            reasons.append(
                "Landlock cannot tell socket files apart, so with allow_unix_sockets set "
                "every Unix socket of yours would be reachable (the warm server's "
                "among them, which hands out a process outside the sandbox): remove "
                "allow_unix_sockets, or install bubblewrap, which covers all but the listed"
            )
        elif network_ok:
            return BackendChoice("landlock", tuple(reasons), seccomp_ok)
        else:
            reasons.append(
                f"Landlock ABI {landlock.abi_version()} cannot block the network and "
                f"seccomp is unavailable ({found.seccomp})"
            )
    raise ConfinementUnavailable(
        f"sandbox mode {settings.sandbox_mode} cannot be enforced here: "
        + "; ".join(reasons)
        + ". Install bubblewrap (apt-get install bubblewrap), or run with "
        "--sandbox danger-full-access to run commands unconfined."
    )


def _denials(settings: SandboxSettings) -> tuple[bool, bool]:
    """Whether the network and Unix sockets are denied."""
    deny_network = settings.restricted and not settings.network_access
    deny_unix = settings.restricted and not settings.allow_unix_sockets
    return deny_network, deny_unix


def server_key(
    settings: SandboxSettings,
    backend: BackendChoice,
    writable: Sequence[Path],
    read_only: Sequence[Path] = (),
    nested_git: Sequence[Path] = (),
) -> ServerKey:
    """The bubblewrap sandbox a command gets under ``settings`` (its options, the seccomp
    program, what they bind): the same key, the same sandbox."""
    deny_network, deny_unix = _denials(settings)
    program = seccomp.bpf_program(deny_network, deny_unix) if backend.seccomp else None
    hide = unix_sockets.to_hide(settings.allow_unix_sockets) if not deny_unix else []
    opts, prefix = bwrap.options(
        writable=writable,
        network=not deny_network,
        hide_sockets=hide,
        read_only=read_only,
        nested_git=nested_git,
    )
    return ServerKey.of(opts, prefix, program)


# Times a key is made again because a socket it covers went away before bubblewrap
# bound over it (each time a program removed a socket in the few ms between)
_COVER_RETRIES = 3


def _fresh_key(
    settings: SandboxSettings,
    backend: BackendChoice,
    writable: Sequence[Path],
    read_only: Sequence[Path],
    nested_git: Sequence[Path],
) -> ServerKey:
    """``server_key``, made again while a socket file it covers has gone meanwhile.

    A socket removed after this check and before bubblewrap binds over it still fails
    a sandbox of its own with bubblewrap's "Can't create file" (a window of a few ms);
    a command server's start is retried instead (``CoversChanged``)."""
    for _ in range(_COVER_RETRIES):
        key = server_key(settings, backend, writable, read_only, nested_git)
        if not key.covers_gone():
            break
    return key


async def spawn_confined(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_fd: int,
    settings: SandboxSettings,
    backend: BackendChoice,
    writable: Sequence[Path],
    read_only: Sequence[Path] = (),
    nested_git: Sequence[Path] = (),
    servers: CommandServers | None = None,
) -> ChildProcess:
    """Start ``argv`` under the confinement ``settings`` ask for, by ``backend``
    (``decide_backend(settings)``, decided once by the caller).

    The process returned offers ``pid``, ``returncode`` and ``wait()`` (a
    ``pidfd_process.PidfdProcess`` where the kernel has pidfds, a
    ``server_handle.ServerProcess`` when it runs in the session's command server).

    ``writable`` are the directories the command may write (empty in read-only mode);
    ``read_only`` folders inside them that stay read-only besides the built-in ones, and
    ``nested_git`` the ``.git`` entries of repositories below their tops. ``servers``:
    the session's command servers, used with bubblewrap unless settings say not to.
    stdin is /dev/null; stdout and stderr go to ``output_fd``; the process leads a new
    session so its whole group can be killed.
    """
    if backend.name == "none" and settings.restricted:  # fail closed, whoever decided
        raise ConfinementUnavailable(f"sandbox mode {settings.sandbox_mode} needs a backend")
    deny_network, deny_unix = _denials(settings)
    start: Callable[..., Awaitable[ChildProcess]] = functools.partial(
        pidfd_process.start, cwd=cwd, env=env, output_fd=output_fd
    )
    if backend.name == "none":
        return await start(argv)
    if backend.name == "bubblewrap":
        key = _fresh_key(settings, backend, writable, read_only, nested_git)
        if servers is not None and settings.command_server:
            for _ in range(_COVER_RETRIES):
                try:
                    return await servers.run(key, argv, cwd=cwd, env=env, output_fd=output_fd)
                except CoversChanged:  # a covered socket went away while it started
                    key = _fresh_key(settings, backend, writable, read_only, nested_git)
                except ServerUnavailable:
                    break  # this command (or this session) gets a sandbox of its own
            key = _fresh_key(settings, backend, writable, read_only, nested_git)
        opts, prefix, program = list(key.options), list(key.prefix), key.seccomp
        pass_fds: tuple[int, ...] = ()
        read_fd = None
        if program is not None:
            read_fd, write_fd = os.pipe()
            try:
                os.write(write_fd, program)  # a few hundred bytes: fits the pipe buffer
            finally:
                os.close(write_fd)
            pass_fds = (read_fd,)
            opts += ["--seccomp", str(read_fd)]
        try:
            cmd = [*opts, "--chdir", str(cwd), "--", *prefix, *argv]
            return await start(cmd, pass_fds=pass_fds)
        finally:
            if read_fd is not None:
                os.close(read_fd)
    ruleset = landlock.Ruleset(writable, deny_network=deny_network)
    filt = seccomp.prepared(deny_network, deny_unix) if backend.seccomp else None
    try:
        return await start(argv, preexec_fn=landlock.child_setup(ruleset, filt))
    finally:
        ruleset.close()


def command_server_check() -> str | None:
    """None when a command server starts and runs a command here, else why not (for
    ``interpreter policy confinement``; starts one, in a folder of its own)."""
    # lazy: only ``policy confinement`` runs this (the settings model is pydantic)
    import asyncio
    import tempfile

    from codemode.sandbox.settings import SandboxSettings

    settings = SandboxSettings(backend="bubblewrap")
    try:
        backend = decide_backend(settings)
    except ConfinementUnavailable:
        return f"needs bubblewrap ({probe().bubblewrap})"

    async def run_one(root: Path) -> str | None:
        server = await server_launch.start(server_key(settings, backend, [root]))
        r, w = os.pipe()
        try:
            try:
                proc = await server.run(["true"], cwd=root, env={"PATH": "/usr/bin:/bin"},
                                        output_fd=w)  # fmt: skip
            finally:
                os.close(w)
            code = await asyncio.wait_for(proc.wait(), 10)
        finally:
            os.close(r)
            server.close()
        return None if code == 0 else f"a command in it exited {code}"

    with tempfile.TemporaryDirectory() as tmp:
        try:
            return asyncio.run(run_one(Path(tmp)))
        except (ServerUnavailable, TimeoutError) as exc:
            return str(exc) or "it did not answer"
