"""Replies for a scripted model server that answers the eval's tasks as their scripts
say (``classic.json``, ``code.js``): the task is found by its prompt in the request,
the dialect by whether ``exec`` is offered, the step by the calls made so far. Used to
test ``interpreter eval`` end to end without a model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from codemode.eval.suite import Task


class Request(Protocol):
    """What the scripted server hands a callable script (its RecordedRequest)."""

    body: dict[str, Any]


class TaskScripts:
    """A callable script: the reply each task's script gives at this step."""

    def __init__(self, tasks: Sequence[Task], **extra: Any) -> None:
        self.tasks = list(tasks)
        self.extra = extra  # fields added to every reply (hang_s, usage, ...)

    def __call__(self, request: Request) -> dict[str, Any]:
        body = request.body
        text = json.dumps(body.get("messages") or body.get("input") or [])
        task = next((t for t in self.tasks if json.dumps(t.prompt)[1:-1] in text), None)
        if task is None:
            return {"text": "no task of the suite in this request", **self.extra}
        tools = json.dumps(body.get("tools") or [])
        code = '"exec"' in tools
        steps = task.code() if code else task.classic()
        step = min(_calls_made(body), len(steps) - 1)
        return {**steps[step], **self.extra}


def _calls_made(body: dict[str, Any]) -> int:
    """Assistant turns so far: chat and anthropic messages, or responses input items."""
    if "messages" in body:
        return sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return sum(1 for item in body.get("input") or []
               if item.get("type") in ("function_call", "custom_tool_call"))
