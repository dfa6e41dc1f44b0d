"""The rules of one session and who approves: what a command, an outside tool's call or
a write outside the roots needs before it may go ahead (``SandboxSession``'s gate).

A command is judged by the execpolicy (``policy``); a ``forbidden`` one is refused, one
needing approval goes to the approver (or is refused when there is none, unless the
approval policy is ``never``); "always" answers are appended to the user's rules file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.locations.user_dirs import codemode_home
from codemode.sandbox.approvals import tool_trust
from codemode.sandbox.approvals.approval import ApprovalRequest, RememberOption, remember_options
from codemode.sandbox.execpolicy.rules import ExactRule, PrefixRule
from codemode.sandbox.execpolicy.rules_file import (
    RulesError,
    append_allow_rule,
    append_exact_rule,
)
from codemode.sandbox.execpolicy.verdicts import Evaluation, PolicyContext
from codemode.tool_terms.errors import ToolError

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.execpolicy.policy import Policy
    from codemode.sandbox.settings import SandboxSettings


class CommandRefused(ToolError):
    """A command the policy forbids, or that needed an approval it did not get."""

    def __init__(self, message: str, evaluation: Evaluation | None = None) -> None:
        super().__init__(message)
        self.evaluation = evaluation


# What a refusal for want of an approver tells the caller to do, by default: the CLI's
# options. An embedding API replaces it with what applies to its caller.
CLI_APPROVAL_REMEDY = (
    "Run with --approval never or --full-auto to let such commands run inside the "
    "sandbox, or run interactively."
)


class CommandGate:
    """Rules and approvals of one session. ``settings`` gives the session's settings
    (read when first needed); ``before_asking(tool)`` raises when a command could not
    run anyway (no confinement here), so that nobody is asked about it."""

    def __init__(
        self,
        workspace: Path,
        settings: Callable[[], SandboxSettings],
        *,
        approver: Approver | None,
        policy: Policy | None,
        rules_file: Path | None,
        before_asking: Callable[[str], object],
    ) -> None:
        self.workspace = workspace
        self._settings = settings
        self.approver = approver
        self._policy = policy
        # the rules and their shell parser are shared with the session's warm-up thread
        self._policy_lock = threading.RLock()
        self._rules_file = rules_file
        self._before_asking = before_asking
        # MCP tools the user allowed "always" in this session (``tool_trust``).
        self.approved_tools: set[str] = set()
        self.approval_remedy = CLI_APPROVAL_REMEDY

    @property
    def settings(self) -> SandboxSettings:
        return self._settings()

    @property
    def rules_file(self) -> Path:
        """Where "always" approvals are saved."""
        return self._rules_file or codemode_home() / "rules" / "default.rules"

    @property
    def policy(self) -> Policy:
        """The rules, loaded on first use (raises RulesError for a broken rules file)."""
        with self._policy_lock:  # the warm-up thread may be loading it
            if self._policy is None:
                # lazy: the execpolicy loads tree-sitter, which a session that never
                # runs a command does not pay for
                from codemode.sandbox.execpolicy.policy import Policy

                self._policy = Policy.load(
                    self.workspace, extra_files=[Path(p).expanduser() for p in self.settings.rules]
                )
                for notice in self._policy.notices:  # repository rules that tried to loosen
                    logging.getLogger("codemode.sandbox").warning("execpolicy: %s", notice)
            return self._policy

    def policy_context(self, cwd: Path) -> PolicyContext:
        return PolicyContext(
            cwd=cwd, writable_roots=(self.workspace, *self.settings.expanded_roots())
        )

    def warm(self) -> None:
        """Load the rules and the shell parser (the warm-up thread's part)."""
        with self._policy_lock:
            self.policy.evaluate("true", self.policy_context(self.workspace))

    async def authorize(
        self, command: str, *, cwd: Path, tool: str | None = None, program: str | None = None
    ) -> Evaluation:
        """Check ``command`` against the policy and ask for approval when needed.

        Returns the evaluation when the command may run; raises CommandRefused (a
        ToolError, so a code-mode program sees an exception it can catch) otherwise.
        ``tool`` (default "shell") is the tool starting it, ``program`` the code-mode
        program making that call (the request shows both).
        """
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
        settings = self.settings
        untrusted = settings.approval_policy == "untrusted"
        if not (ev.decision == "prompt" or (ev.decision == "unmatched" and untrusted)):
            return ev
        if settings.approval_policy == "never":
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
                f"session. {self.approval_remedy}",
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
            sandbox_mode=settings.sandbox_mode,
            approval_policy=settings.approval_policy,
            commands=needing,
            program=program,
            can_remember=True,
            remember_options=remember_options(command, needing),
        )
        self._before_asking(tool)  # asking for something that cannot run is no use
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

    def remember(self, option: RememberOption) -> None:
        """Allow what ``option`` says from now on, in this session and the next."""
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

    async def authorize_tool(
        self, name: str, trust: str, args: Any, *, program: str | None = None
    ) -> None:
        """An outside tool's call, decided by its trust (``tool_trust``)."""
        await tool_trust.authorize_tool(self, name, trust, args, program=program)

    async def approve_write(self, tool: str, path: Path, why: str) -> bool:
        """Ask the approver about a write of ``path`` outside the writable roots (never
        under approval policy ``never``); "always" makes its folder a writable root."""
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


def _rule_note(rule: str | None, source: str | None) -> str:
    if not rule:
        return "no rule allows it"
    return f"rule {rule}" + (f" at {source}" if source else "")
