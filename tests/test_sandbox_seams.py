"""The sandbox's seams: every ToolContext holds a ``Sandbox`` (``Unconfined`` when none
was given), the execpolicy's hard checks are a list run by one loop, and the backend is
decided once (``decide_backend``) and obeyed by ``spawn_confined``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest
from codemode.sandbox.confinement import confine
from codemode.sandbox.confinement.confine import (
    BackendChoice,
    ConfinementUnavailable,
    decide_backend,
    spawn_confined,
)
from codemode.sandbox.execpolicy import command_checks
from codemode.sandbox.execpolicy.policy import Policy, PolicyContext
from codemode.sandbox.execpolicy.verdicts import CommandFacts, CommandVerdict
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.sandbox.unconfined import Unconfined
from codemode.tool_terms.errors import ToolError
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext


async def test_a_context_without_a_sandbox_runs_commands_unconfined_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEAMS_API_KEY", "hunter2")
    ctx = ToolContext(workspace=tmp_path)
    assert isinstance(ctx.sandbox, Unconfined)
    # a command no sandbox session would let run without asking: nothing is checked here
    r = await builtin_registry().invoke(
        "shell", {"command": 'echo "key=${SEAMS_API_KEY:-none}" > out.txt; cat out.txt'}, ctx
    )
    assert r["exit_code"] == 0, r
    assert "key=none" in r["output"]  # credentials withheld all the same
    assert (tmp_path / "out.txt").read_text() == "key=none\n"


async def test_unconfined_writes_in_the_workspace_and_its_extra_roots_only(
    tmp_path: Path,
) -> None:
    ws, extra, outside = tmp_path / "ws", tmp_path / "extra", tmp_path / "outside"
    for d in (ws, extra, outside):
        d.mkdir()
    ctx = ToolContext(workspace=ws)
    ctx.writable_roots.append(extra)  # the context's own list: added later, it counts
    assert ctx.resolve_writable(extra / "a.txt") == extra / "a.txt"
    with pytest.raises(ToolError, match="refusing to write outside the workspace"):
        ctx.resolve_writable(outside / "a.txt")
    with pytest.raises(ToolError, match=r"refusing to write .*\.git"):
        ctx.resolve_writable(ws / ".git" / "config")
    # nobody to ask about a write outside the roots; an outside tool is not checked
    assert await ctx.sandbox.approve_write("write_file", outside / "a.txt", "outside") is False
    await ctx.sandbox.authorize_tool("srv__tool", "", {})


async def test_a_session_passes_the_command_line_through_whole(tmp_path: Path) -> None:
    """The policy judges the very line the shell runs (no argv round trip): a line with
    quoting an argv join would change is decided and run as written."""
    answers: list[str] = []

    async def approver(request: ApprovalRequest) -> ApprovalChoice:
        answers.append(request.command)
        return "once"

    session = SandboxSession(
        tmp_path, {"sandbox_mode": "danger-full-access", "approval_policy": "untrusted"},
        approver=approver,
    )  # fmt: skip
    ctx = ToolContext(workspace=tmp_path, sandbox=session)
    line = "touch 'a b' \"c\" && ls"
    try:
        r = await builtin_registry().invoke("shell", {"command": line}, ctx)
    finally:
        session.close()
    assert r["output"].split("\n")[:2] == ["a b", "c"], r
    assert answers == [line]  # asked about (touch: unmatched, untrusted) as written


def test_the_hard_checks_are_data_run_by_one_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[CommandFacts] = []

    def no_figlet(facts: CommandFacts) -> list[CommandVerdict]:
        seen.append(facts)
        if facts.words[:1] == ("figlet",):
            return [CommandVerdict(facts.shown, "forbidden", "test: no figlet", None, "no")]
        return []

    ctx = PolicyContext(cwd=tmp_path, writable_roots=(tmp_path,))
    assert Policy().evaluate("figlet hi", ctx).decision != "forbidden"
    monkeypatch.setattr(command_checks, "HARD_CHECKS", (*command_checks.HARD_CHECKS, no_figlet))
    ev = Policy().evaluate("echo a | figlet hi", ctx)
    assert ev.decision == "forbidden" and ev.deciding is not None
    assert ev.deciding.rule == "test: no figlet"
    assert [f.shown for f in seen] == ["echo a", "figlet hi"]
    assert seen[1].cwds == [tmp_path] and seen[1].ctx is ctx


def test_danger_full_access_decides_no_backend_without_probing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse() -> None:
        raise AssertionError("probed")

    monkeypatch.setattr(confine, "probe", refuse)
    assert decide_backend(SandboxSettings(sandbox_mode="danger-full-access")) == BackendChoice(
        "none"
    )


def test_a_restricted_choice_names_what_it_passed_over() -> None:
    try:
        choice = decide_backend(SandboxSettings())
    except ConfinementUnavailable as exc:  # neither works here: the error names both
        assert "bubblewrap" in str(exc)
        return
    found = confine.probe()
    assert choice.name in ("bubblewrap", "landlock")
    if choice.name == "landlock":
        assert choice.passed_over == (found.bubblewrap,)
    else:
        assert choice.passed_over == ()
    assert choice.seccomp == (found.seccomp is None)


async def test_spawn_confined_refuses_no_backend_for_a_restricted_mode(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        with pytest.raises(ConfinementUnavailable, match="needs a backend"):
            await spawn_confined(
                ["true"],
                cwd=tmp_path,
                env={},
                output_fd=w,
                settings=SandboxSettings(),
                backend=BackendChoice("none"),
                writable=[tmp_path],
            )
    finally:
        os.close(r)
        os.close(w)
