"""The ``apply_patch`` tool: edit files with a patch, all or nothing.

The engine lives in ``codemode.tools.patch``; this module is the tool's one definition
(arguments, result, description, grammar) from which every surface is generated. On
wires with freeform tools the model sends the patch as raw text (constrained by the
lark grammar where the wire supports one); elsewhere as ``{"input": "..."}``; in code
mode ``tools.apply_patch(patchText)`` takes either.
"""

from __future__ import annotations

import asyncio
from importlib.resources import files
from typing import Literal

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolResult


class ApplyPatchArgs(StrictArgs):
    input: str = Field(description="The whole patch, from '*** Begin Patch' to '*** End Patch'.")


class PatchChange(ToolResult):
    path: str = Field(description="The file, relative to the working directory.")
    kind: Literal["add", "update", "delete", "move"] = Field(
        description="What happened to it; a move may also have changed its content."
    )
    move_to: str | None = Field(
        default=None, description="For a move, the new path (path is the old one)."
    )


class ApplyPatchResult(ToolResult):
    changes: list[PatchChange] = Field(description="One entry per file section, in order.")
    diff: str = Field(description="Unified diff of everything the patch changed.")


async def run_apply_patch(args: ApplyPatchArgs, ctx: ToolContext) -> ApplyPatchResult:
    """Apply the patch in the workspace, through the session's file store (raises
    PatchError, a ToolError, on failure)."""
    from codemode.tools.context import store_for
    from codemode.tools.patch.engine import apply_patch_text

    store = store_for(ctx)
    outcome = await asyncio.to_thread(apply_patch_text, args.input, ctx.workspace, ctx, store)
    return ApplyPatchResult(
        changes=[PatchChange(path=c.path, kind=c.kind, move_to=c.move_to) for c in outcome.changes],
        diff=outcome.diff,
    )


def _data(name: str) -> str:
    return files("codemode.tools").joinpath(name).read_text(encoding="utf-8")


APPLY_PATCH = Tool(
    name="apply_patch",
    description=_data("apply_patch.md").strip(),
    args_model=ApplyPatchArgs,
    result_model=ApplyPatchResult,
    handler=run_apply_patch,
    freeform_field="input",
    grammar=_data("apply_patch.lark"),
    effects=frozenset({"write"}),
    dry_run=True,
    item="file_change",
    acp_kind="edit",
    hook_names=("apply_patch", "Edit", "Write"),
    render=rendering.apply_patch,
    core=True,
)
