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

Status = Literal["ok", "failed", "skipped"]
# How a failed run failed: the runtime's kinds, plus "worker" when the process or Ray
# task running it died.
ErrorKind = Literal[
    "syntax", "runtime", "limit", "internal", "worker", "apply", "publish", "agent", "budget"
]

# Console output kept per repository in the report; beyond it the head and tail survive.
OUTPUT_CHARS = 20_000
# The same for the return value (as JSON) and the error message; changed files listed.
VALUE_CHARS = 20_000
ERROR_CHARS = 4_000
CHANGED_FILES = 1_000


@dataclass(frozen=True)
class AgentTask:
    """An agent session per repository (``interpreter exec --repos ... PROMPT``)."""

    prompt: str
    # SessionOptions fields but cwd (model, provider, code_mode, harness, max_turns,
    # overrides, sandbox_mode, approval_policy, full_auto).
    options: dict[str, Any] = field(default_factory=dict)
    token_budget: int | None = None  # input + output tokens for this repository
    # USD per million input and output tokens, for cost_usd; None: no cost reported.
    price: tuple[float, float] | None = None


@dataclass(frozen=True)
class RepoTask:
    """One repository's share of a batch run."""

    repository: str  # absolute path of the working copy (the script runs in a copy)
    source: str  # the script's JavaScript source
    engine: str = "quickjs"
    limits: Limits = field(default_factory=Limits)
    argv: tuple[str, ...] = ()
    dry_run: bool = False
    # How the commands the script's tools start are checked and confined (None: not at
    # all); each repository gets its own sandbox session rooted at it.
    sandbox: SandboxSettings | None = None
    # The working copy packed by ``shipping.pack``, for a worker that cannot read
    # ``repository`` (a Ray node); None: read it where it is.
    archive: bytes | None = None
    # An agent session instead of ``source`` (which then holds the prompt).
    agent: AgentTask | None = None


class RepoResult(BaseModel):
    """One line of the report: how the script went in one repository."""

    repository: str = Field(description="Absolute path of the working copy.")
    status: Status = Field(
        description="ok; failed (the script threw, a limit stopped it, its changes could "
        "not be applied or published); skipped (not run: see reason)."
    )
    duration_s: float = Field(description="Wall-clock seconds for this repository.")
    tool_calls: int = Field(description="Tool calls the script made.")
    error: str | None = Field(default=None, description="Why it failed, in one line.")
    error_kind: ErrorKind | None = Field(default=None, description="syntax, runtime, limit, ...")
    value: Any = Field(default=None, description="The script's return value (JSON, capped).")
    output: str = Field(default="", description="Console output (head and tail when long).")
    changed_files: list[str] | None = Field(
        default=None,
        description="Files the run wrote or deleted (a dry run: would have); at most "
        f"{CHANGED_FILES}, changed_count says how many in all.",
    )
    changed_count: int | None = Field(default=None, description="How many files changed.")
    diff: str | None = Field(
        default=None, description="The changes as one unified diff (head and tail when long)."
    )
    rolled_back: bool | None = Field(
        default=None,
        description="The run changed files but the repository was left as it was (it "
        "failed, or its changes could not be applied or published).",
    )
    reason: str | None = Field(default=None, description="Why a skipped repository was not run.")
    started_at: str | None = Field(default=None, description="UTC start, ISO 8601.")
    ended_at: str | None = Field(default=None, description="UTC end, ISO 8601.")
    attempts: int = Field(default=1, description="Times it was started (a dead worker: retried).")
    branch: str | None = Field(default=None, description="Branch published (--branch).")
    commit: str | None = Field(default=None, description="Commit made on it.")
    pushed: bool | None = Field(default=None, description="Whether --push pushed it.")
    pull_request: str | None = Field(
        default=None, description="The pull (merge) request opened for it (--pull-request)."
    )
    worker: str | None = Field(default=None, description="Where it ran (Ray: node address).")
    model_requests: int | None = Field(default=None, description="Agent runs: model requests.")
    input_tokens: int | None = Field(default=None, description="Agent runs: input tokens.")
    output_tokens: int | None = Field(default=None, description="Agent runs: output tokens.")
    cost_usd: float | None = Field(default=None, description="Agent runs, with --price.")
    # The binary-safe journal of what the run changed, from the worker to the driver,
    # which applies it; never written to the report.
    journal: list[Any] | None = Field(default=None, exclude=True)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def report_line(self) -> str:
        """This result as one JSON Lines line (no newline); fields that do not apply
        (a diff where nothing ran, a branch where nothing was published) left out."""
        try:
            return self.model_dump_json(exclude=self._absent())
        except ValueError:
            # A JavaScript string may hold a lone surrogate, which UTF-8 cannot encode;
            # JSON can, as a \\u escape.
            return json.dumps(self.model_dump(exclude=self._absent()), ensure_ascii=True)

    def _absent(self) -> set[str]:
        absent = {"journal"}
        optional = ("changed_files", "changed_count", "diff", "rolled_back", "reason")
        absent |= {name for name in optional if getattr(self, name) is None}
        later = ("branch", "commit", "pushed", "pull_request", "worker", "model_requests",
                 "input_tokens", "output_tokens", "cost_usd")
        absent |= {name for name in later if getattr(self, name) is None}
        return absent

    def set_changes(self, files: list[str], diff: str) -> None:
        """Record the changed files (capped) and the diff."""
        self.changed_count = len(files)
        self.changed_files = files[:CHANGED_FILES]
        self.diff = diff


def now_iso() -> str:
    """The time now, UTC, ISO 8601 with milliseconds."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds")


def worker_failure(
    repository: str, message: str, duration_s: float = 0.0, started_at: str | None = None
) -> RepoResult:
    """The result for a repository whose worker (process or Ray task) died. It ran in a
    copy, so the repository itself is as it was."""
    return RepoResult(
        repository=repository,
        status="failed",
        duration_s=duration_s,
        tool_calls=0,
        error=message[:ERROR_CHARS],
        error_kind="worker",
        started_at=started_at,
        ended_at=now_iso(),
    )
