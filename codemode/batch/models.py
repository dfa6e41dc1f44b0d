"""What crosses the process boundary: a task per repository in, a result per repository out.

Both are pickled to worker processes (or Ray tasks) and back, so they hold plain data
only; ``RepoResult`` is also the report's line format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from codemode.js_runtime.models import Limits

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings

Status = Literal["ok", "failed"]
# How a failed run failed: the runtime's kinds, plus "worker" when the process or Ray
# task running it died.
ErrorKind = Literal["syntax", "runtime", "limit", "internal", "worker"]

# Console output kept per repository in the report; beyond it the head and tail survive.
OUTPUT_CHARS = 20_000


@dataclass(frozen=True)
class RepoTask:
    """One repository's share of a batch run."""

    repository: str  # absolute path of the working copy; the task's workspace
    source: str  # the script's JavaScript source
    engine: str = "quickjs"
    limits: Limits = field(default_factory=Limits)
    argv: tuple[str, ...] = ()
    dry_run: bool = False
    # How the commands the script's tools start are checked and confined (None: not at
    # all); each repository gets its own sandbox session rooted at it.
    sandbox: SandboxSettings | None = None


class RepoResult(BaseModel):
    """One line of the report: how the script went in one repository."""

    repository: str = Field(description="Absolute path of the working copy.")
    status: Status = Field(description="ok, or failed (the script threw, or a limit stopped it).")
    duration_s: float = Field(description="Wall-clock seconds for this repository.")
    tool_calls: int = Field(description="Tool calls the script made.")
    error: str | None = Field(default=None, description="Why it failed, in one line.")
    error_kind: ErrorKind | None = Field(default=None, description="syntax, runtime, limit, ...")
    value: Any = Field(default=None, description="The script's return value (JSON).")
    output: str = Field(default="", description="Console output (head and tail when long).")
    changed_files: list[str] | None = Field(
        default=None, description="Dry run only: files the script would change."
    )
    diff: str | None = Field(
        default=None, description="Dry run only: the changes as one unified diff."
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def report_line(self) -> str:
        """This result as one JSON Lines line (no newline); dry-run fields only in a dry run."""
        try:
            return self.model_dump_json(exclude=self._absent())
        except ValueError:
            # A JavaScript string may hold a lone surrogate, which UTF-8 cannot encode;
            # JSON can, as a \\u escape.
            return json.dumps(self.model_dump(exclude=self._absent()), ensure_ascii=True)

    def _absent(self) -> set[str]:
        return {"changed_files", "diff"} if self.changed_files is None else set()


def worker_failure(repository: str, message: str, duration_s: float = 0.0) -> RepoResult:
    """The result for a repository whose worker (process or Ray task) died."""
    return RepoResult(
        repository=repository,
        status="failed",
        duration_s=duration_s,
        tool_calls=0,
        error=message,
        error_kind="worker",
    )
