"""``interpreter policy check``: what the execpolicy decides for a command, and why.

The exit status is the decision, so scripts can branch on it: 0 allow, 10 unmatched
(the approval policy decides), 20 prompt, 30 forbidden; 2 for a rules file that does
not load (or a usage error).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from codemode.control_chars import json_text
from codemode.sandbox.execpolicy.policy import Evaluation, Policy, PolicyContext

EXIT_STATUS = {"allow": 0, "unmatched": 10, "prompt": 20, "forbidden": 30}


def command_line(words: Sequence[str]) -> str:
    """One argument is a shell command line as typed; several are an argv to quote."""
    return words[0] if len(words) == 1 else shlex.join(words)


def evaluate(
    words: Sequence[str], *, cwd: Path, rules_files: Sequence[Path] = ()
) -> tuple[Evaluation, list[str]]:
    """Load the rules (raises RulesError) and judge the command; also the notices about
    repository rules that were ignored."""
    workspace = cwd.resolve()
    policy = Policy.load(workspace, extra_files=rules_files)
    ctx = PolicyContext(cwd=workspace, writable_roots=(workspace,))
    return policy.evaluate(command_line(words), ctx), policy.notices


def render(ev: Evaluation, *, as_json: bool) -> str:
    if as_json:
        return json_text(ev.to_json(), indent=2, ensure_ascii=False)
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
