"""The sandbox of one session (a ``protocols.Sandbox``), composed of its parts.

``SandboxSession.spawn`` is what the ``shell`` tool's ``spawn()`` seam calls: policy
check → approval (if required) → confined execution. ``check_writable`` is what
``ToolContext.resolve_writable`` calls for the file tools. The parts, one concept each:

- the settings (``SandboxSettings``, validated on first use) and the writable roots
  they give, noted for ``host_programs``;
- ``approvals.gate.CommandGate``: the rules and the approver (commands, outside tools,
  writes outside the roots);
- ``confined_runner.ConfinedRunner``: the backend (``confine.decide_backend``), the
  scratch folder, the protected entries kept around each command (``keeper``) and the
  command servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from codemode.locations import host_programs
from codemode.sandbox.approvals.gate import CommandGate
from codemode.sandbox.approvals.gate import CommandRefused as CommandRefused
from codemode.sandbox.env import scrub_environment
from codemode.sandbox.modes import APPROVAL_POLICIES, SANDBOX_MODES
from codemode.sandbox.protection.paths import write_refusal
from codemode.sandbox.shell_command import shell_argv
from codemode.tool_terms.errors import ToolError

T = TypeVar("T")

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.confined_runner import ConfinedRunner
    from codemode.sandbox.execpolicy.policy import Evaluation, Policy, PolicyContext
    from codemode.sandbox.server.pidfd_process import ChildProcess
    from codemode.sandbox.server.server_launch import Launch
    from codemode.sandbox.settings import SandboxSettings

# How long prewarm's thread waits for the event loop to let it load the rules (a loop
# that ended without waiting once never says).
_RULES_WAIT_S = 5.0

# Cheap to construct: settings are validated (pydantic), rules loaded and tree-sitter
# and the confinement backends imported only when the first command or write needs
# them, so a script that never calls a tool pays nothing.


class SandboxSession:
    """The settings of one session, its gate (rules, approver) and its runner.

    ``approver`` is None on non-interactive surfaces: a command needing approval is then
    refused, unless ``approval_policy`` is ``never``. ``settings`` may also be a plain
    mapping of SandboxSettings fields, validated on first use.
    """

    def __init__(
        self,
        workspace: str | Path,
        settings: SandboxSettings | Mapping[str, Any] | None = None,
        *,
        approver: Approver | None = None,
        policy: Policy | None = None,
        rules_file: Path | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self._settings_input = settings
        self._settings: SandboxSettings | None = None
        self.gate = CommandGate(
            self.workspace,
            lambda: self.settings,
            approver=approver,
            policy=policy,
            rules_file=rules_file,
            before_asking=lambda tool: self.runner.backend(self.settings, tool),
        )
        self._runner: ConfinedRunner | None = None
        self._prestarting: asyncio.Task[None] | None = None
        # Programs codemode starts on the host are never looked up in a writable root
        # (``host_programs``): the workspace now, the rest once the settings are read.
        self._roots_token = host_programs.register_roots([self.workspace])
        weakref.finalize(self, host_programs.unregister_roots, self._roots_token)
        # Last: reading the settings notes the writable roots, which needs the above.
        if isinstance(settings, Mapping):
            _check_modes(settings)
            if set(settings) - {"sandbox_mode", "approval_policy"}:
                self.settings  # noqa: B018 - validate the rest now: a bad value fails here

    # --- settings and roots ----------------------------------------------------------

    @property
    def settings(self) -> SandboxSettings:
        if self._settings is None:
            # lazy: pydantic loads with the first command or write, not with the session
            from codemode.sandbox.settings import SandboxSettings

            raw = self._settings_input
            if raw is None:
                self._settings = SandboxSettings()
            elif isinstance(raw, SandboxSettings):
                self._settings = raw
            else:
                self._settings = SandboxSettings.model_validate(dict(raw))
            self._note_roots()
        return self._settings

    def _note_roots(self) -> None:
        roots = [self.workspace, *self.settings.expanded_roots()]
        if self._runner is not None and self._runner.scratch is not None:
            roots.append(self._runner.scratch)
        old = self._roots_token
        self._roots_token = host_programs.register_roots(roots)
        weakref.finalize(self, host_programs.unregister_roots, self._roots_token)
        host_programs.unregister_roots(old)

    @property
    def sandbox_mode(self) -> str:
        return self.settings.sandbox_mode

    @property
    def approval_policy(self) -> str:
        return self.settings.approval_policy

    def writable_roots(self) -> list[Path] | None:
        """Where writing is allowed: None = anywhere, [] = nowhere."""
        mode = self.settings.sandbox_mode
        if mode == "danger-full-access":
            return None
        if mode == "read-only":
            return []
        return [self.workspace, *self.settings.expanded_roots()]

    def check_writable(self, path: Path, shown: str | Path) -> Path:
        """``path`` if the file tools may write it; raises ToolError saying why not."""
        reason = write_refusal(path, self.writable_roots())
        if reason is not None:
            raise ToolError(
                f"refusing to write {shown}: {reason} (sandbox mode {self.settings.sandbox_mode})"
            )
        return path

    # --- rules and approvals (the gate) ----------------------------------------------

    @property
    def approver(self) -> Approver | None:
        return self.gate.approver

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        self.gate.approver = approver

    @property
    def approved_tools(self) -> set[str]:
        return self.gate.approved_tools

    @property
    def rules_file(self) -> Path:
        return self.gate.rules_file

    @property
    def policy(self) -> Policy:
        return self.gate.policy

    def policy_context(self, cwd: Path) -> PolicyContext:
        return self.gate.policy_context(cwd)

    async def authorize(
        self, command: str, *, cwd: Path, tool: str | None = None, program: str | None = None
    ) -> Evaluation:
        """``CommandGate.authorize``: the evaluation, or CommandRefused."""
        return await self.gate.authorize(command, cwd=cwd, tool=tool, program=program)

    async def authorize_tool(
        self, name: str, trust: str, args: Any, *, program: str | None = None
    ) -> None:
        await self.gate.authorize_tool(name, trust, args, program=program)

    async def approve_write(self, tool: str, path: Path, why: str) -> bool:
        return await self.gate.approve_write(tool, path, why)

    # --- running commands (the runner) ----------------------------------------------

    @property
    def runner(self) -> ConfinedRunner:
        if self._runner is None:
            # lazy: the confinement backends load with the first command
            from codemode.sandbox.confined_runner import ConfinedRunner

            self._runner = ConfinedRunner(self._note_roots)
        return self._runner

    def scratch_dir(self) -> Path:
        """A private temporary directory (TMPDIR) writable by confined commands."""
        return self.runner.scratch_dir()

    async def spawn(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        output_fd: int,
        tool: str | None = None,
        program: str | None = None,
    ) -> ChildProcess:
        """Authorize and start the shell command line ``command`` confined; raises
        CommandRefused / ToolError."""
        tool = tool or "shell"
        await self.gate.authorize(command, cwd=cwd, tool=tool, program=program)
        return await self.spawn_trusted(
            shell_argv(command, login=self.settings.login_shell),
            cwd=cwd, env=env, output_fd=output_fd, tool=tool,
        )

    async def spawn_trusted(
        self, argv: list[str], *, cwd: Path, env: Mapping[str, str], output_fd: int, tool: str
    ) -> ChildProcess:
        """Start ``argv`` confined as the commands are (backend, roots, withheld
        environment), without the policy or approvals: ``spawn`` once authorized, and
        a command the person trusted (a hook running a project's tool,
        ``hooks.confined``) that must not get more rights than a command. Raises
        ToolError where it cannot be confined."""
        s = self.settings
        return await self.runner.start(
            list(argv),
            cwd=cwd,
            env=scrub_environment(env, allow=s.env_allowlist, deny=s.env_denylist),
            output_fd=output_fd,
            settings=s,
            backend=self.runner.backend(s, tool),
            roots=self.writable_roots() or [],
            tool=tool,
        )

    def after_command(self, proc: ChildProcess) -> list[str]:
        """Call once ``proc`` (from ``spawn``) has exited: puts back any protected git
        or ``.codemode/`` entry the command changed; one line per repair."""
        return self.runner.after(proc)

    def explain_refusals(self, output: str) -> list[str]:
        """A line saying why, when ``output`` shows a write to a protected path refused
        by the kernel (whose own message names no reason)."""
        if not self.settings.restricted:
            return []
        # lazy: the protected-path hints load when a restricted command has run
        from codemode.sandbox.protection.protected import refusal_hint

        hint = refusal_hint(output)
        return [f"[sandbox] {hint}"] if hint else []

    # --- warming up and closing ------------------------------------------------------

    def prewarm(self) -> None:
        """Get ready for the first command in the background, for a session that will
        likely run commands: in a thread, the backends probed (bubblewrap started once;
        as root the ``dropcaps`` helper compiled the first time), then, called in a
        running event loop, the command server started, and the rules loaded with the
        shell parser. Tens of milliseconds that then pass while the first model request
        is out instead of before the first command.

        The command server's key is made in the thread from a guessed layout (the roots
        not walked: ``ConfinedRunner.launch``) and its bubblewrap started on the loop's
        thread, so that it is ready by the first command even when the model answers at
        once; ``_prestart`` walks the roots on the loop meanwhile, and a server started
        for a wrong guess is stopped and never used. The rules and the parser
        (tens of milliseconds of Python, holding the GIL) wait until the event loop next
        waits, which in a new session is the first model request: done while the
        session is still being built, they delay that request by as much."""
        s = self.settings
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        launch = None
        if loop is not None and s.restricted and s.command_server and s.backend != "landlock":
            self.runner.scratch_dir()  # (made here: the thread and the loop see one)
            launch = self.runner.launching()
        rules = threading.Event()
        threading.Thread(
            target=self._warm, args=(rules, launch, loop), name="codemode-sandbox-warm",
            daemon=True,
        ).start()  # fmt: skip
        if loop is None:
            rules.set()
            return
        loop.call_soon(rules.set)
        if launch is not None:
            self._prestarting = loop.create_task(self._prestart())

    def _warm(
        self,
        rules: threading.Event,
        launch: Future[Launch | None] | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        handed = False  # ``launch`` is the runner's to settle
        try:
            if self.settings.restricted:
                # lazy: the confinement backends load with the first command (here, early)
                from codemode.sandbox.confinement.confine import probe

                probe()
            if launch is not None and loop is not None:
                handed = self._launch(launch, loop)
        finally:
            if launch is not None and not handed:
                # (its first command starts a server itself)
                from codemode.sandbox.server.server_launch import settle

                settle(launch, None)
        rules.wait(_RULES_WAIT_S)
        with contextlib.suppress(Exception):  # a broken rules file: the first command says so
            self.gate.warm()

    def _launch(self, launch: Future[Launch | None], loop: asyncio.AbstractEventLoop) -> bool:
        """Have the runner start the command server ahead; whether it took ``launch``."""
        s = self.settings
        try:
            backend = self.runner.backend(s, "shell")
        except ToolError:
            return False  # (the first command says why)
        if backend.name != "bubblewrap":
            return False
        self.runner.launch(s, backend, self.writable_roots() or [], launch, loop)
        return True

    async def _prestart(self) -> None:
        """Start the command server the first command will use, while the first model
        request is out (``prewarm``)."""
        s = self.settings
        try:  # (a probe may be running: wait off the loop)
            backend = await _in_daemon_thread(self.runner.backend, s, "shell")
        except ToolError:
            return
        if backend.name == "bubblewrap":
            await self.runner.prestart(s, backend, self.writable_roots() or [])

    def close(self) -> None:
        if self._prestarting is not None:
            self._prestarting.cancel()
            self._prestarting = None
        if self._runner is not None:
            self._runner.close()
        host_programs.unregister_roots(self._roots_token)


async def _in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon thread of its own, not asyncio's executor, whose threads
    the loop joins when it closes: a session that ends before the backends' probe has
    (a turn whose program ran no command) does not wait for it at its exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return  # cancelled meanwhile
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # the caller's to see, on the loop
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="codemode-sandbox-backend", daemon=True).start()
    return await done


def _check_modes(settings: Mapping[str, Any]) -> None:
    """A mapping's two modes checked without pydantic (a ValueError names a bad one), so
    a bad value fails when the session is made, not at the first command."""
    for key, allowed in (("sandbox_mode", SANDBOX_MODES), ("approval_policy", APPROVAL_POLICIES)):
        if key in settings and settings[key] not in allowed:
            raise ValueError(
                f"invalid {key} {settings[key]!r}: expected one of {', '.join(allowed)}"
            )
