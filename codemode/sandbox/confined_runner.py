"""Starting a session's authorized commands confined, and what lives across them: the
scratch folder (TMPDIR), the protected entries kept around each command (``Keeper``),
the session's command servers, and the refusal of a writable root inside codemode's own
state (``own_paths``). ``SandboxSession`` holds one, made with its first command.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.hostfs.writer import Writer
from codemode.sandbox.confinement.confine import (
    BackendChoice,
    ConfinementUnavailable,
    decide_backend,
    server_key,
    spawn_confined,
)
from codemode.sandbox.git.keeper import Keeper
from codemode.sandbox.protection import own_paths
from codemode.sandbox.server import server_launch
from codemode.sandbox.server.command_servers import CommandServers
from codemode.sandbox.server.server_handle import ServerUnavailable
from codemode.sandbox.server.server_launch import Launch
from codemode.tool_terms.errors import ToolError

if TYPE_CHECKING:
    from codemode.sandbox.server.pidfd_process import ChildProcess
    from codemode.sandbox.settings import SandboxSettings


class ConfinedRunner:
    """``note_roots`` is called when the scratch folder is made (it is a writable root
    too: ``host_programs`` looks for no program there)."""

    def __init__(self, note_roots: Callable[[], None]) -> None:
        self._note_roots = note_roots
        self.scratch: Path | None = None
        self._keeper = Keeper()
        self._servers: CommandServers | None = None
        self._refusals: dict[tuple[str, tuple[Path, ...]], str | None] = {}

    def backend(self, settings: SandboxSettings, tool: str) -> BackendChoice:
        """The backend commands get (``confine.decide_backend``); raises ToolError
        saying what is missing when a restricted mode cannot be enforced here."""
        try:
            return decide_backend(settings)
        except ConfinementUnavailable as exc:
            raise ToolError(f"tools.{tool}: {exc}") from None

    def scratch_dir(self) -> Path:
        """A private temporary directory (TMPDIR) writable by confined commands."""
        if self.scratch is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="codemode-tmp-"))
            weakref.finalize(self, _remove_scratch, self.scratch)
            self._note_roots()
        return self.scratch

    def _roots(self, guarded: Sequence[Path]) -> tuple[list[Path], list[Path]]:
        """What a confined command may write (the writable roots, then the scratch
        folder), and the roots whose protected entries are kept (all but the scratch)."""
        return [*guarded, self.scratch_dir()], list(guarded)

    def _command_servers(self) -> CommandServers:
        if self._servers is None:
            self._servers = CommandServers()
        return self._servers

    async def start(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        output_fd: int,
        settings: SandboxSettings,
        backend: BackendChoice,
        roots: Sequence[Path],
        tool: str,
    ) -> ChildProcess:
        """Start an authorized ``argv`` by ``backend``; ``roots``: the writable roots
        (the workspace first). Adds TMPDIR to ``env`` in a restricted mode."""
        writable, guarded = self._roots(roots) if settings.restricted else ([], [])
        if settings.restricted:
            env["TMPDIR"] = str(self.scratch_dir())
        self._refuse_own_roots(backend.name, guarded, tool)
        deeper, nested = self._keeper.layout(backend.name, writable, guarded)
        guard = self._keeper.before(backend.name, guarded, deeper, nested)
        use_server = backend.name == "bubblewrap" and settings.command_server
        servers = self._command_servers() if use_server else None
        try:
            proc = await spawn_confined(
                argv,
                cwd=cwd,
                env=env,
                output_fd=output_fd,
                settings=settings,
                backend=backend,
                writable=writable,
                read_only=deeper,
                nested_git=nested,
                servers=servers,
            )
        except ConfinementUnavailable as exc:
            raise ToolError(f"tools.{tool}: {exc}") from None
        except BaseException:
            if guard is not None:
                self._keeper.repair(guard)
            raise
        if guard is not None:
            self._keeper.started(proc, guard)
        return proc

    def _refuse_own_roots(self, backend: str, guarded: list[Path], tool: str) -> None:
        """Refuse a writable root inside codemode's own state or installation, or (under
        Landlock) one containing them (``own_paths``); once per session and backend."""
        if backend == "none":
            return
        key = (backend, tuple(guarded))
        if key not in self._refusals:
            why = next(filter(None, (own_paths.root_refusal(r, backend) for r in guarded)), None)
            if why is None:
                own_paths.make_state_dirs(guarded)
            self._refusals[key] = why
        why = self._refusals[key]
        if why is not None:
            raise ToolError(f"tools.{tool}: {why}")

    async def prestart(
        self, settings: SandboxSettings, backend: BackendChoice, roots: Sequence[Path]
    ) -> None:
        """Start the command server the first command will use (``prewarm``)."""
        writable, guarded = self._roots(roots)
        deeper, nested = self._keeper.layout("bubblewrap", writable, guarded)
        key = server_key(settings, backend, writable, deeper, nested)
        with contextlib.suppress(Exception):  # the first command says what went wrong
            await self._command_servers().prestart(key)

    def launch(
        self,
        settings: SandboxSettings,
        backend: BackendChoice,
        roots: Sequence[Path],
        future: concurrent.futures.Future[Launch | None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Start the command server the first command will likely use, without waiting
        for it, and set ``future`` to it (None: not started): its layout guessed without
        walking the roots (``Keeper.guess_layout``), it is used only if that command's
        own key is the same. The key is made here, in the session's warm-up thread (the
        scratch folder made first, on the loop's; none is made here, and nothing once
        the session has closed); bubblewrap is started on ``loop``'s thread, which it
        dies with (``--die-with-parent`` is the *thread's* death)."""
        key = None
        scratch = self.scratch
        with contextlib.suppress(Exception):  # the first command says what went wrong
            if scratch is not None:
                writable, guarded = [*roots, scratch], list(roots)
                deeper = self._keeper.guess_layout(writable, guarded)
                if deeper is not None:
                    key = server_key(settings, backend, writable, deeper, [])
        if key is None:
            server_launch.settle(future, None)
            return

        def start() -> None:
            launch = None
            try:
                servers = self._servers
                if servers is not None and not servers.closed:
                    with contextlib.suppress(ServerUnavailable):
                        launch = server_launch.launch(key)
            finally:
                server_launch.settle(future, launch)

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop has closed: no session to start it for
            server_launch.settle(future, None)

    def launching(self) -> concurrent.futures.Future[Launch | None] | None:
        """``CommandServers.launching`` for this session's servers."""
        return self._command_servers().launching()

    def after(self, proc: ChildProcess) -> list[str]:
        """What the keeper put back once ``proc`` has exited; one line per repair."""
        return self._keeper.after(proc, self.scratch)

    def close(self) -> None:
        if self._servers is not None:
            self._servers.close()
            self._servers = None
        self._keeper.close()
        if self.scratch is not None:
            _remove_scratch(self.scratch)
            self.scratch = None


def _remove_scratch(scratch: Path) -> None:
    """Remove the scratch folder and what commands left in it, walked by descriptor
    from the folder above it (``writer``): no link a command made inside is followed."""
    with contextlib.suppress(OSError, ToolError):
        Writer(scratch.parent).remove_tree(scratch.name)

