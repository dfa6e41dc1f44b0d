"""The tool pipeline's ``hooks`` stage: PreToolUse, PostToolUse and PermissionRequest for
every call, whichever surface made it; a code-mode program's calls are hooked one by
one, in the order the program makes them, each with its provenance.

A hook's input for a tool event is Codex's and Claude Code's (``tool_name``,
``tool_input``, ``tool_use_id``, ``tool_response``), with ``tool_name`` the name those
agents give the tool (``Bash`` for the shell) and these fields of ours:
``harness_tool_name`` (the name the model called), ``canonical_tool_name`` (ours:
``shell``), and for a program's call ``exec_call_id``, ``cell_id``, ``program_item_id``
and ``sequence`` (1 for the program's first call). Matchers are tried on all three names.

- PreToolUse ``deny`` (or exit status 2, or a guard that fails) refuses the call with a
  ``ToolError`` naming the hook and its reason: a program can catch it. ``ask`` goes to
  the session's approver (refused when there is none). ``updatedInput`` replaces the
  arguments, which are then validated like any call's.
- PostToolUse runs after a call that succeeded; its ``additionalContext`` (and a
  ``block`` reason) reaches the model with the program's result.
- PermissionRequest runs when the sandbox would ask the person (``hook_approver``):
  ``allow`` runs the call without asking, ``deny`` refuses it, nothing leaves it to the
  person.
- ``continue: false`` from any of them ends the turn once the current calls finish.
"""

from __future__ import annotations

import dataclasses
import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode.hooks.definitions import HookDef
from codemode.hooks.engine import Combined, HookEngine
from codemode.tools.context import ToolError
from codemode.tools.pipeline import Call, Interceptor, Next
from codemode.tools.provenance import current_model_call, current_program

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest, Approver
    from codemode.sandbox.protocols import Sandbox
    from codemode.sandbox.session import SandboxSession
    from codemode.tools.registry import ToolRegistry


@dataclass(frozen=True)
class CallNames:
    """A call's names: what hooks written for other agents call it, what the model
    called it, what we call it; ``subjects`` are what matchers are tried on."""

    hook_name: str
    harness: str
    canonical: str
    subjects: tuple[str, ...]


# The call being hooked, for the PermissionRequest hooks of an approval it leads to.
_current: ContextVar[tuple[CallNames, dict[str, Any]] | None] = ContextVar(
    "codemode_hooked_call", default=None
)


def names_of(call: Call) -> CallNames:
    tool = call.tool
    canonical = getattr(tool, "target", "") or call.name  # an emulated harness's tool
    definition = getattr(tool, "target_tool", None) or tool
    aliases: tuple[str, ...] = getattr(definition, "hook_names", ()) if definition else ()
    subjects = tuple(dict.fromkeys((call.name, canonical, *aliases)))
    return CallNames(aliases[0] if aliases else call.name, call.name, canonical, subjects)


def hooks_interceptor(engine: HookEngine) -> Interceptor:
    """The interceptor for the ``hooks`` stage of a registry's pipeline."""

    async def hooks(call: Call, next_: Next) -> Any:
        program = current_program.get()
        sequence = program.next_sequence() if program is not None else None
        if not engine.tool_hooks:
            return await next_(call)
        names = names_of(call)
        pre = engine.matching("PreToolUse", names.subjects)
        post = engine.matching("PostToolUse", names.subjects)
        permission_any = engine.has("PermissionRequest")
        if not (pre or post or permission_any):
            return await next_(call)  # nothing matches this tool: nothing to pay
        fields = _call_fields(call, names, sequence)
        parent = program.item_id if program is not None else None
        if permission_any:
            # For the PermissionRequest hooks of an approval this call leads to. Set,
            # not reset with a token: the runtime starts a call in the program's context
            # and may finish it in a task of its own.
            previous = _current.get()
            _current.set((names, fields))
        try:
            return await _hooked(engine, call, next_, names, fields, pre, post, parent)
        finally:
            if permission_any:
                _current.set(previous)

    return hooks


async def _hooked(
    engine: HookEngine,
    call: Call,
    next_: Next,
    names: CallNames,
    fields: dict[str, Any],
    pre: tuple[HookDef, ...],
    post: tuple[HookDef, ...],
    parent: str | None,
) -> Any:
    """The PreToolUse hooks, the call, the PostToolUse hooks."""
    if pre:
        answer = await engine.fire("PreToolUse", fields, hooks=pre, parent_id=parent)
        _stop_if_asked(engine, answer)
        if answer.decision == "deny":
            raise ToolError(f"tools.{names.harness} was denied by {answer.reason_text()}")
        if answer.updated_input is not None:
            call = dataclasses.replace(call, args=answer.updated_input)
            fields = {**fields, "tool_input": answer.updated_input}
        if answer.decision == "ask":
            await _ask(call, names, answer)
        _note(engine, answer, "PreToolUse", names)
    result = await next_(call)
    if post:
        answer = await engine.fire(
            "PostToolUse", {**fields, "tool_response": result}, hooks=post, parent_id=parent
        )
        _stop_if_asked(engine, answer)
        if answer.decision == "block":
            answer.context.insert(0, answer.reason_text())
        _note(engine, answer, "PostToolUse", names)
    return result


def _call_fields(call: Call, names: CallNames, sequence: int | None) -> dict[str, Any]:
    program = current_program.get()
    model_call = current_model_call.get()
    args = call.args
    field = getattr(call.tool, "freeform_field", None)
    if isinstance(args, str) and field:
        args = {field: args}  # `tools.apply_patch("...")`: hooks always get an object
    fields: dict[str, Any] = {
        "tool_name": names.hook_name,
        "tool_input": args,
        "tool_use_id": model_call if sequence is None or model_call is None
        else f"{model_call}#{sequence}",
        "harness_tool_name": names.harness,
        "canonical_tool_name": names.canonical,
    }
    if program is not None and program.cell_id is not None:
        fields.update(
            exec_call_id=program.exec_call_id,
            cell_id=program.cell_id,
            program_item_id=program.item_id,
            sequence=sequence,
        )
    return fields


def _note(engine: HookEngine, answer: Combined, event: str, names: CallNames) -> None:
    """Context the hooks added, for the model: with the program's result, or after a
    classic call's."""
    if not answer.context:
        return
    text = "\n".join(answer.context)
    note = f"[{event} hook on tools.{names.harness}]\n{text}"
    program = current_program.get()
    if program is not None:
        program.notes.append(note)
    else:
        engine.pending_context.append(note)


def _stop_if_asked(engine: HookEngine, answer: Combined) -> None:
    if answer.stop and engine.stop_request is None:
        engine.stop_request = answer.stop_reason or "a hook asked to stop"


async def _ask(call: Call, names: CallNames, answer: Combined) -> None:
    """A PreToolUse ``ask``: the session's approver decides, as for a command."""
    from codemode.sandbox.approvals.approval import ApprovalRequest

    approver = call.ctx.sandbox.approver
    if approver is None:
        raise ToolError(
            f"tools.{names.harness}: {answer.reason_text()} asks for approval, and no one "
            "can approve it in this session"
        )
    request = ApprovalRequest(
        tool=names.canonical,
        command=f"tools.{names.harness}({_shown(call.args)})",
        justification=answer.reason_text(),
        cwd=call.ctx.workspace,
        program=call.program,
        can_remember=False,
    )
    if await approver(request) == "deny":
        raise ToolError(
            f"tools.{names.harness}: the user declined the call ({answer.reason_text()})"
        )


def hook_approver(engine: HookEngine, inner: Approver | None) -> Approver:
    """The approver that asks PermissionRequest hooks first, then ``inner`` (or refuses,
    when there is none)."""

    async def approve(request: ApprovalRequest) -> ApprovalChoice:
        hooked = _current.get()
        if hooked is not None:
            names, fields = hooked
            subjects = names.subjects
        else:
            subjects, fields = (request.tool,), {"tool_name": request.tool}
        fields = {**fields, "tool_input": {"command": request.command,
                                           "description": request.justification or ""}}
        answer = await engine.fire("PermissionRequest", fields, subjects)
        _stop_if_asked(engine, answer)
        if answer.decision == "allow":
            return "once"
        if answer.decision in ("deny", "block"):
            raise ToolError(f"tools.{request.tool}: `{request.simple_command or request.command}` "
                            f"was denied by {answer.reason_text()}")
        if inner is None:
            raise ToolError(f"tools.{request.tool}: `{request.simple_command or request.command}` "
                            "needs approval and no one can approve it in this session "
                            "(no PermissionRequest hook decided)")
        return await inner(request)

    approve.hooked = True  # type: ignore[attr-defined]
    return approve


def _shown(args: object, limit: int = 400) -> str:
    try:
        text = json.dumps(args, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(args)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def install(
    registry: ToolRegistry, engine: HookEngine, sandbox: SandboxSession | None = None
) -> None:
    """Hook every call ``registry`` runs; with ``sandbox``, its approvals go to the
    PermissionRequest hooks first, and hooks that run a project's tool run in it
    (``hooks.confined``)."""
    registry.use(hooks_interceptor(engine), "hooks")
    if sandbox is not None:
        engine.sandbox = sandbox
        watch_approvals(engine, sandbox)


def watch_approvals(engine: HookEngine, sandbox: Sandbox) -> None:
    """Send ``sandbox``'s approvals to the PermissionRequest hooks first, if there are
    any now and its approver is not already theirs."""
    if engine.has("PermissionRequest") and not getattr(sandbox.approver, "hooked", False):
        sandbox.approver = hook_approver(engine, sandbox.approver)
