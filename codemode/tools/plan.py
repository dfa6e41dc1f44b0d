"""The ``update_plan`` tool: the model keeps a short checklist the user can follow.

The tool does nothing to the workspace; the session turns each call into a
``todo_list`` item, so the plan shows in the terminal and in ``--json`` output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult

StepStatus = Literal["pending", "in_progress", "completed"]


class PlanStep(StrictArgs):
    step: str = Field(description="One short action, e.g. 'Run the failing test'.")
    status: StepStatus = Field(description="pending, in_progress or completed.")


class UpdatePlanArgs(StrictArgs):
    plan: list[PlanStep] = Field(description="The whole plan, in order; replaces the last one.")
    explanation: str | None = Field(
        default=None, description="Why the plan changed, in a sentence, when it did."
    )


class UpdatePlanResult(ToolResult):
    plan: list[PlanStep]
    message: str


async def update_plan(args: UpdatePlanArgs, ctx: ToolContext) -> UpdatePlanResult:
    """Accept the new plan; at most one step may be in progress at a time."""
    active = [s.step for s in args.plan if s.status == "in_progress"]
    if len(active) > 1:
        raise ToolError(
            f"update_plan: {len(active)} steps are in_progress ({'; '.join(active)}); "
            "keep exactly one in progress"
        )
    done = sum(s.status == "completed" for s in args.plan)
    return UpdatePlanResult(plan=args.plan, message=f"plan updated: {done}/{len(args.plan)} done")


UPDATE_PLAN = Tool(
    name="update_plan",
    description=(
        "Record or revise your step-by-step plan for a multi-step task. Send the whole "
        "plan each time, marking steps pending, in_progress (one at a time) or completed."
    ),
    args_model=UpdatePlanArgs,
    result_model=UpdatePlanResult,
    handler=update_plan,
    effects=frozenset({"read"}),  # it only records the plan it is given
    item="todo_list",
    acp_kind="think",
    hook_names=("TodoWrite",),
    render=rendering.update_plan,
    core=True,
)
