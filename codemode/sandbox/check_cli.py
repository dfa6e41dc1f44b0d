"""``interpreter policy check``: what the execpolicy decides for a command, and why."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.policy import Evaluation, Policy, PolicyContext


def command_line(words: Sequence[str]) -> str:
    """One argument is a shell command line as typed; several are an argv to quote."""
    return words[0] if len(words) == 1 else shlex.join(words)


def evaluate(words: Sequence[str], *, cwd: Path, rules_files: Sequence[Path] = ()) -> Evaluation:
    """Load the rules (raises RulesError) and judge the command."""
    workspace = cwd.resolve()
    policy = Policy.load(workspace, extra_files=rules_files)
    ctx = PolicyContext(cwd=workspace, writable_roots=(workspace,))
    return policy.evaluate(command_line(words), ctx)


def render(ev: Evaluation, *, as_json: bool) -> str:
    if as_json:
        return json.dumps(ev.to_json(), indent=2, ensure_ascii=False)
    lines = [f"decision: {ev.decision}"]
    d = ev.deciding
    if d is not None:
        lines.append(f"command: {d.command}")
        if d.rule:
            lines.append(f"rule: {d.rule}" + (f"  ({d.source})" if d.source else ""))
        else:
            lines.append("rule: (none matched; the approval policy decides)")
        if d.justification:
            lines.append(f"justification: {d.justification}")
    others = [v for v in ev.verdicts if v is not d]
    if others:
        lines.append("other simple commands:")
        lines += [f"  {v.verdict:<9}  {v.command}" for v in others]
    return "\n".join(lines)
