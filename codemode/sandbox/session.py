"""The sandbox state of one session, and the one path every subprocess goes through.

``SandboxSession.spawn`` is what the ``shell`` tool's ``spawn()`` seam calls: policy
check → approval (if required) → confined execution. ``check_writable`` is what
``ToolContext.resolve_writable`` calls for the file tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.sandbox import approval_context
from codemode.sandbox.env import scrub_environment
from codemode.sandbox.paths import write_refusal
from codemode.tools.context import ToolError

if TYPE_CHECKING:
    from codemode.sandbox.approval import Approver
    from codemode.sandbox.policy import CommandVerdict, Evaluation, Policy, PolicyContext
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
        if isinstance(settings, Mapping):
            _check_modes(settings)
            if set(settings) - {"sandbox_mode", "approval_policy"}:
                self.settings  # noqa: B018 - validate the rest now: a bad value fails here
        self.approver = approver
        self._policy = policy
        self._rules_file = rules_file
        self._scratch: Path | None = None
        self._placeholders: set[Path] = set()
        # MCP tools the user allowed "always" in this session (codemode.sandbox.tool_trust).
        self.approved_tools: set[str] = set()

    @property
    def settings(self) -> SandboxSettings:
        if self._settings is None:
            from codemode.sandbox.settings import SandboxSettings

            raw = self._settings_input
            if raw is None:
                self._settings = SandboxSettings()
            elif isinstance(raw, SandboxSettings):
                self._settings = raw
            else:
                self._settings = SandboxSettings.model_validate(dict(raw))
        return self._settings

    @property
    def rules_file(self) -> Path:
        """Where "always" approvals are saved."""
        from codemode.sandbox.policy import codemode_home

        return self._rules_file or codemode_home() / "rules" / "default.rules"

    # --- rules -----------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The rules, loaded on first use (raises RulesError for a broken rules file)."""
        if self._policy is None:
            from codemode.sandbox.policy import Policy

            self._policy = Policy.load(
                self.workspace, extra_files=[Path(p).expanduser() for p in self.settings.rules]
            )
        return self._policy

    def policy_context(self, cwd: Path) -> PolicyContext:
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

    def scratch_dir(self) -> Path:
        """A private temporary directory (TMPDIR) writable by confined commands."""
        if self._scratch is None:
            import tempfile
            import weakref

            self._scratch = Path(tempfile.mkdtemp(prefix="codemode-tmp-"))
            weakref.finalize(self, shutil.rmtree, str(self._scratch), True)
        return self._scratch

    # --- running commands ------------------------------------------------------------

    async def authorize(self, command: str, *, cwd: Path, tool: str | None = None) -> Evaluation:
        """Check ``command`` against the policy and ask for approval when needed.

        Returns the evaluation when the command may run; raises CommandRefused (a
        ToolError, so a code-mode program sees an exception it can catch) otherwise.
        """
        from codemode.sandbox.approval import ApprovalRequest
        from codemode.sandbox.rules import RulesError

        tool = tool or approval_context.current_tool()
        try:
            policy = self.policy
        except RulesError as exc:
            raise CommandRefused(f"tools.{tool}: cannot load the execpolicy rules: {exc}") from None
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
            program=approval_context.current_program(),
            can_remember=all(v.words for v in needing),
        )
        self._ensure_confinement(tool)  # asking for something that cannot run is no use
        choice = await self.approver(request)
        if choice == "deny":
            raise CommandRefused(f"tools.{tool}: the user declined to run `{d.command}`", ev)
        if choice == "always" and request.can_remember:
            self.remember(needing)
        return ev

    def _ensure_confinement(self, tool: str) -> None:
        from codemode.sandbox.confine import ConfinementUnavailable, choose_backend

        try:
            choose_backend(self.settings)
        except ConfinementUnavailable as exc:
            raise ToolError(f"tools.{tool}: {exc}") from None

    def remember(self, verdicts: Sequence[CommandVerdict]) -> None:
        """Allow these commands' prefixes from now on, in this session and the next."""
        from codemode.sandbox.rules import PrefixRule, append_allow_rule

        for v in verdicts:
            pattern = list(v.words)
            rule_source = f"{self.rules_file}:appended"
            append_allow_rule(self.rules_file, pattern)
            rule = PrefixRule(
                pattern=tuple((w,) for w in pattern),
                decision="allow",
                source=rule_source,
                layer="user",
            )
            self.policy.add_user_rule(rule)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        output_fd: int,
        tool: str | None = None,
    ) -> asyncio.subprocess.Process:
        """Authorize and start ``argv`` confined; raises CommandRefused / ToolError."""
        from codemode.sandbox.confine import ConfinementUnavailable, spawn_confined

        tool = tool or approval_context.current_tool()
        s = self.settings
        argv = list(argv)
        script = _shell_script(argv)
        await self.authorize(script if script is not None else shlex.join(argv), cwd=cwd, tool=tool)
        child_env = scrub_environment(env, allow=s.env_allowlist, deny=s.env_denylist)
        writable = self.writable_roots()
        if s.restricted:
            scratch = self.scratch_dir()
            child_env["TMPDIR"] = str(scratch)
            writable = [*(writable or []), scratch]
        if s.login_shell and script is not None and len(argv) == 3:
            argv = [argv[0], "-lc", argv[2]]
        # bubblewrap needs a mount point to keep a missing .codemode/ from being
        # created, and leaves it behind as an empty folder: removed again at close().
        self._placeholders.update(
            p for root in writable or [] if not (p := root / ".codemode").exists()
        )
        try:
            return await spawn_confined(
                argv,
                cwd=cwd,
                env=child_env,
                output_fd=output_fd,
                settings=s,
                writable=writable or [],
            )
        except ConfinementUnavailable as exc:
            raise ToolError(f"tools.{tool}: {exc}") from None

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        for placeholder in self._placeholders:
            with contextlib.suppress(OSError):  # gone, or no longer empty: keep it
                placeholder.rmdir()
        self._placeholders.clear()


def _check_modes(settings: Mapping[str, Any]) -> None:
    """A mapping's two modes checked without pydantic (a ValueError names a bad one), so
    a bad value fails when the session is made, not at the first command."""
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


def _shell_script(argv: Sequence[str]) -> str | None:
    """The script of ``[sh, -c, SCRIPT]``, else None."""
    if len(argv) == 3 and argv[1] == "-c" and os.path.basename(argv[0]) in ("bash", "sh"):
        return argv[2]
    return None
