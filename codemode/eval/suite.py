"""The task suite: one folder per task under ``codemode/eval/tasks/`` (tasks/README.md
says what each file is). A task is a prompt, a workspace to start from, a check of the
workspace at the end, and the replies a scripted model gives in each dialect."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
# A line of code.js that starts the next program (the model's next exec call).
PROGRAM_MARK = "// @program"


class SuiteError(Exception):
    """A task folder that cannot be used; the message names it."""


@dataclass
class Task:
    name: str
    folder: Path
    prompt: str
    answer: str
    verify: Callable[[Path], None]

    @classmethod
    def load(cls, folder: Path) -> Task:
        try:
            meta = json.loads((folder / "task.json").read_text("utf-8"))
            prompt, answer = meta["prompt"], meta["answer"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SuiteError(f"{folder}: task.json needs a prompt and an answer ({exc})") from None
        spec = importlib.util.spec_from_file_location(f"task_{folder.name}", folder / "verify.py")
        if spec is None or spec.loader is None or not (folder / "verify.py").is_file():
            raise SuiteError(f"{folder}: no verify.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return cls(folder.name, folder, prompt, answer, module.verify)

    def setup(self, root: Path) -> None:
        # Through the host's writer: a symlink in the suite's folder is copied as a link,
        # never followed (a suite could otherwise pull any file of the user's in).
        from codemode.hostfs.writer import Writer

        Writer(root).copy_in(self.folder / "setup")

    def classic(self) -> list[dict[str, Any]]:
        """One model step per tool call (claude-code's tool names), then the answer."""
        calls = json.loads((self.folder / "classic.json").read_text("utf-8"))
        return [*({"tool_calls": [c]} for c in calls), {"text": self.answer}]

    def code(self) -> list[dict[str, Any]]:
        """One exec call per program of code.js, then the answer."""
        programs: list[list[str]] = []
        for line in (self.folder / "code.js").read_text("utf-8").splitlines():
            if line == PROGRAM_MARK:
                programs.append([])
            elif programs:
                programs[-1].append(line)
        steps = [{"tool_calls": [{"name": "exec", "arguments": {"code": "\n".join(p)}}]}
                 for p in programs]
        return [*steps, {"text": self.answer}]


def load_tasks(names: list[str] | None = None, folder: Path = TASKS_DIR) -> list[Task]:
    """Every task in ``folder`` (name order), or the ones named."""
    found = {d.name: d for d in sorted(folder.iterdir()) if (d / "task.json").is_file()}
    if names:
        unknown = [n for n in names if n not in found]
        if unknown:
            raise SuiteError(f"no task named {', '.join(unknown)} (there are: "
                             f"{', '.join(found)})")
        return [Task.load(found[n]) for n in names]
    return [Task.load(d) for d in found.values()]
