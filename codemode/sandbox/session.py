"""The sandbox state of one session, and the one path every subprocess goes through.

``SandboxSession.spawn`` is what the ``shell`` tool's ``spawn()`` seam calls: policy
check → approval (if required) → confined execution. ``check_writable`` is what
``ToolContext.resolve_writable`` calls for the file tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode import host_programs
from codemode.errors import ToolError
from codemode.sandbox.env import scrub_environment
from codemode.sandbox.keeper import Keeper
from codemode.sandbox.paths import write_refusal
from codemode.sandbox.shell_command import shell_argv

if TYPE_CHECKING:
    from codemode.sandbox.approval import Approver, RememberOption
    from codemode.sandbox.command_servers import CommandServers
    from codemode.sandbox.pidfd_process import ChildProcess
    from codemode.sandbox.policy import Evaluation, Policy, PolicyContext
    from codemode.sandbox.settings import SandboxSettings

# Cheap to construct: settings are validated (pydantic), rules loaded and tree-sitter
# imported only when the first command or write needs them, so a script that never
# calls a tool pays nothing.


class CommandRefused(ToolError):
    """A command the policy forbids, or that needed an approval it did not get."""

    def __init__(self, message: str, evaluation: Evaluation | None = None) -> None:
        super().__init__(message)
        self.evaluation = evaluation


class SandboxSession:
    """Settings, loaded rules and the approver of one session.

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
        self.approver = approver
        self._policy = policy
        # the rules and their shell parser are shared with ``prewarm``'s thread
        self._policy_lock = threading.RLock()
        self._rules_file = rules_file
        self._scratch: Path | None = None
        self._keeper = Keeper()
        self._servers: CommandServers | None = None
        self._prestarting: asyncio.Task[None] | None = None
        # MCP tools the user allowed "always" in this session (codemode.sandbox.tool_trust).
        self.approved_tools: set[str] = set()
        # Programs codemode starts on the host are never looked up in a writable root
        # (``host_programs``): the workspace now, the rest once the settings are read.
        self._roots_token = host_programs.register_roots([self.workspace])
        weakref.finalize(self, host_programs.unregister_roots, self._roots_token)
        self._refusals: dict[tuple[str, tuple[Path, ...]], str | None] = {}
        # Last: reading the settings notes the writable roots, which needs the above.
        if isinstance(settings, Mapping):
            _check_modes(settings)
            if set(settings) - {"sandbox_mode", "approval_policy"}:
                self.settings  # noqa: B018 - validate the rest now: a bad value fails here

    def _note_roots(self) -> None:
        roots = [self.workspace, *self.settings.expanded_roots()]
        if self._scratch is not None:
            roots.append(self._scratch)
        old = self._roots_token
        self._roots_token = host_programs.register_roots(roots)
        weakref.finalize(self, host_programs.unregister_roots, self._roots_token)
        host_programs.unregister_roots(old)

    @property
    def settings(self) -> SandboxSettings:
        if self._settings is None:
            # lazy: a session is held before its first command
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

    @property
    def sandbox_mode(self) -> str:
        return self.settings.sandbox_mode

    @property
    def approval_policy(self) -> str:
        return self.settings.approval_policy

    @property
    def rules_file(self) -> Path:
        """Where "always" approvals are saved."""
        # lazy: a session is held before its first command
        from codemode.sandbox.policy import codemode_home

        return self._rules_file or codemode_home() / "rules" / "default.rules"

    # --- rules -----------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The rules, loaded on first use (raises RulesError for a broken rules file)."""
        with self._policy_lock:  # ``prewarm``'s thread may be loading it
            if self._policy is None:
                # lazy: a session is held before its first command
                from codemode.sandbox.policy import Policy

                self._policy = Policy.load(
                    self.workspace, extra_files=[Path(p).expanduser() for p in self.settings.rules]
                )
                for notice in self._policy.notices:  # repository rules that tried to loosen
                    logging.getLogger("codemode.sandbox").warning("execpolicy: %s", notice)
            return self._policy

    def policy_context(self, cwd: Path) -> PolicyContext:
        # lazy: a session is held before its first command
        from codemode.sandbox.policy import PolicyContext

        return PolicyContext(
            cwd=cwd, writable_roots=(self.workspace, *self.settings.expanded_roots())
        )

    # --- writing ---------------------------------------------------------------------

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

    async def approve_write(self, tool: str, path: Path, why: str) -> bool:
        """Ask the approver about a write of ``path`` outside the writable roots (never
        under approval policy ``never``); "always" makes its folder a writable root."""
        # lazy: a session is held before its first command
        from codemode.sandbox.approval import ApprovalRequest

        s = self.settings
        if self.approver is None or s.approval_policy == "never":
            return False
        action = f"write {path}"
        request = ApprovalRequest(
            tool=tool,
            command=action,
            simple_command=action,
            decision="prompt",
            justification=why,
            cwd=self.workspace,
            sandbox_mode=s.sandbox_mode,
            approval_policy=s.approval_policy,
        )
        choice = await self.approver(request)
        if choice == "deny":
            raise ToolError(f"{tool}: the user declined writing {path}")
        if choice.split(":")[0] == "always":
            s.writable_roots.append(path.parent)
        return True

    async def authorize_tool(
        self, name: str, trust: str, args: Any, *, program: str | None = None
    ) -> None:
        """An outside tool's call, decided by its trust (``tool_trust``)."""
        # lazy: a session is held before its first command
        from codemode.sandbox.tool_trust import authorize_tool

        await authorize_tool(self, name, trust, args, program=program)

    def prewarm(self) -> None:
        """Get ready for the first command in the background, for a session that will
        likely run commands: in a thread, the backends probed (bubblewrap started once;
        as root the ``dropcaps`` helper compiled the first time) and the rules loaded
        with the shell parser; called in a running event loop, the command server
        started. Tens of milliseconds that then pass while the first model request is
        out instead of before the first command."""
        threading.Thread(target=self._warm, name="codemode-sandbox-warm", daemon=True).start()
        s = self.settings
        if not (s.restricted and s.command_server and s.backend != "landlock"):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._prestarting = loop.create_task(self._prestart())

    def _warm(self) -> None:
        # lazy: a session is held before its first command
        from codemode.sandbox.confine import probe

        if self.settings.restricted:
            probe()
        # a broken rules file: the first command says so
        with contextlib.suppress(Exception), self._policy_lock:
            self.policy.evaluate("true", self.policy_context(self.workspace))

    def scratch_dir(self) -> Path:
        """A private temporary directory (TMPDIR) writable by confined commands."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="codemode-tmp-"))
            weakref.finalize(self, shutil.rmtree, str(self._scratch), True)
            self._note_roots()
        return self._scratch

    # --- running commands ------------------------------------------------------------

    async def authorize(
        self, command: str, *, cwd: Path, tool: str | None = None, program: str | None = None
    ) -> Evaluation:
        """Check ``command`` against the policy and ask for approval when needed.

        Returns the evaluation when the command may run; raises CommandRefused (a
        ToolError, so a code-mode program sees an exception it can catch) otherwise.
        ``tool`` (default "shell") is the tool starting it, ``program`` the code-mode
        program making that call (the request shows both).
        """
        # lazy: a session is held before its first command
        from codemode.sandbox.approval import ApprovalRequest, remember_options
        from codemode.sandbox.rules import RulesError

        tool = tool or "shell"
        try:
            policy = self.policy
        except RulesError as exc:
            raise CommandRefused(f"tools.{tool}: cannot load the execpolicy rules: {exc}") from None
        with self._policy_lock:  # (held only while the warm-up thread parses)
            ev = policy.evaluate(command, self.policy_context(cwd))
        d = ev.deciding
        if ev.decision == "forbidden" and d is not None:
            raise CommandRefused(
                f"tools.{tool}: forbidden by policy: `{d.command}` — "
                f"{d.justification or 'a rule forbids it'} ({_rule_note(d.rule, d.source)})",
                ev,
            )
        untrusted = self.settings.approval_policy == "untrusted"
        if not (ev.decision == "prompt" or (ev.decision == "unmatched" and untrusted)):
            return ev
        if self.settings.approval_policy == "never":
            return ev  # never ask: the sandbox mode alone confines it
        assert d is not None
        if self.approver is None:
            why = d.justification or (
                "no rule allows it under the untrusted approval policy"
                if d.verdict == "unmatched"
                else "a rule asks for approval"
            )
            raise CommandRefused(
                f"tools.{tool}: `{d.command}` needs approval ({why}; "
                f"{_rule_note(d.rule, d.source)}) and no one can approve it in this "
                "session. Run with --approval never or --full-auto to let such commands run "
                "inside the sandbox, or run interactively.",
                ev,
            )
        needing = tuple(
            ev.needing_approval()
            if untrusted
            else [v for v in ev.verdicts if v.verdict == "prompt"]
        )
        request = ApprovalRequest(
            tool=tool,
            command=command,
            simple_command=d.command,
            decision=d.verdict,
            rule=d.rule,
            source=d.source,
            justification=d.justification,
            cwd=cwd,
            sandbox_mode=self.settings.sandbox_mode,
            approval_policy=self.settings.approval_policy,
            commands=needing,
            program=program,
            can_remember=True,
            remember_options=remember_options(command, needing),
        )
        self._ensure_confinement(tool)  # asking for something that cannot run is no use
        choice = await self.approver(request)
        if choice == "deny":
            raise CommandRefused(f"tools.{tool}: the user declined to run `{d.command}`", ev)
        if isinstance(choice, str) and choice.split(":")[0] == "always":
            index = choice.partition(":")[2]
            options = request.remember_options
            if index.isdigit() and int(index) < len(options):
                self.remember(options[int(index)])
            elif options:
                self.remember(options[0])
        return ev

    def _ensure_confinement(self, tool: str) -> None:
        # lazy: a session is held before its first command
        from codemode.sandbox.confine import ConfinementUnavailable, choose_backend

        try:
            choose_backend(self.settings)
        except ConfinementUnavailable as exc:
            raise ToolError(f"tools.{tool}: {exc}") from None

    def remember(self, option: RememberOption) -> None:
        """Allow what ``option`` says from now on, in this session and the next."""
        # lazy: a session is held before its first command
        from codemode.sandbox.rules import (
            ExactRule,
            PrefixRule,
            append_allow_rule,
            append_exact_rule,
        )

        source = f"{self.rules_file}:appended"
        if option.command is not None:
            append_exact_rule(self.rules_file, option.command)
            self.policy.add_user_rule(ExactRule(option.command, source, "user"))
        else:
            append_allow_rule(self.rules_file, list(option.prefix))
            self.policy.add_user_rule(
                PrefixRule(
                    pattern=tuple((w,) for w in option.prefix),
                    decision="allow",
                    source=source,
                    layer="user",
                )
            )

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
        # lazy: a session is held before its first command
        from codemode.sandbox.confine import ConfinementUnavailable, spawn_confined

        tool = tool or "shell"
        s = self.settings
        await self.authorize(command, cwd=cwd, tool=tool, program=program)
        child_env = scrub_environment(env, allow=s.env_allowlist, deny=s.env_denylist)
        writable, guarded = self._confined_roots() if s.restricted else ([], [])
        if s.restricted:
            child_env["TMPDIR"] = str(self.scratch_dir())
        argv = shell_argv(command, login=s.login_shell)
        backend = "none"
        if s.restricted:
            # lazy: a session is held before its first command
            from codemode.sandbox.confine import choose_backend

            try:
                backend = choose_backend(s)
            except ConfinementUnavailable as exc:
                raise ToolError(f"tools.{tool}: {exc}") from None
        self._refuse_own_roots(backend, guarded, tool)
        deeper, nested = self._keeper.layout(backend, writable, guarded)
        guard = self._keeper.before(backend, guarded, deeper, nested)
        servers = self._command_servers() if backend == "bubblewrap" and s.command_server else None
        try:
            proc = await spawn_confined(
                argv,
                cwd=cwd,
                env=child_env,
                output_fd=output_fd,
                settings=s,
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
            # lazy: a session is held before its first command
            from codemode.sandbox import own_paths

            why = next(filter(None, (own_paths.root_refusal(r, backend) for r in guarded)), None)
            if why is None:
                own_paths.make_state_dirs(guarded)
            self._refusals[key] = why
        why = self._refusals[key]
        if why is not None:
            raise ToolError(f"tools.{tool}: {why}")

    def _confined_roots(self) -> tuple[list[Path], list[Path]]:
        """What a confined command may write (the writable roots, then the scratch
        folder), and the roots whose protected entries are kept (all but the scratch)."""
        guarded = list(self.writable_roots() or [])
        return [*guarded, self.scratch_dir()], guarded

    def _command_servers(self) -> CommandServers:
        if self._servers is None:
            # lazy: a session is held before its first command
            from codemode.sandbox.command_servers import CommandServers

            self._servers = CommandServers()
        return self._servers

    async def _prestart(self) -> None:
        """Start the command server the first command will use, while the first model
        request is out (``prewarm``)."""
        # lazy: a session is held before its first command
        from codemode.sandbox.confine import probe, server_key

        await asyncio.to_thread(probe)  # (a probe may be running: wait off the loop)
        s = self.settings
        if probe().bubblewrap is not None or s.backend == "landlock":
            return
        writable, guarded = self._confined_roots()
        deeper, nested = self._keeper.layout("bubblewrap", writable, guarded)
        with contextlib.suppress(Exception):  # the first command says what went wrong
            await self._command_servers().prestart(server_key(s, writable, deeper, nested))

    def after_command(self, proc: ChildProcess) -> list[str]:
        """Call once ``proc`` (from ``spawn``) has exited: puts back any protected git
        or ``.codemode/`` entry the command changed; one line per repair."""
        return self._keeper.after(proc, self._scratch)

    def explain_refusals(self, output: str) -> list[str]:
        """A line saying why, when ``output`` shows a write to a protected path refused
        by the kernel (whose own message names no reason)."""
        if not self.settings.restricted:
            return []
        # lazy: a session is held before its first command
        from codemode.sandbox.protected import refusal_hint

        hint = refusal_hint(output)
        return [f"[sandbox] {hint}"] if hint else []

    def close(self) -> None:
        if self._prestarting is not None:
            self._prestarting.cancel()
            self._prestarting = None
        if self._servers is not None:
            self._servers.close()
            self._servers = None
        self._keeper.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        host_programs.unregister_roots(self._roots_token)


def _check_modes(settings: Mapping[str, Any]) -> None:
    """A mapping's two modes checked without pydantic (a ValueError names a bad one), so
    a bad value fails when the session is made, not at the first command."""
    # lazy: a session is held before its first command
    from codemode.sandbox.modes import APPROVAL_POLICIES, SANDBOX_MODES

    for key, allowed in (("sandbox_mode", SANDBOX_MODES), ("approval_policy", APPROVAL_POLICIES)):
        if key in settings and settings[key] not in allowed:
            raise ValueError(
                f"invalid {key} {settings[key]!r}: expected one of {', '.join(allowed)}"
            )


def _rule_note(rule: str | None, source: str | None) -> str:
    if not rule:
        return "no rule allows it"
    return f"rule {rule}" + (f" at {source}" if source else "")

