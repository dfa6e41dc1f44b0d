"""Session recording: one JSON Lines file per session under ``~/.codemode/sessions/``.

Each line is a record: ``session_meta`` first, then ``message`` (the conversation as
the model sees it, which is what resume and replay need) and ``event`` (what the user
saw). Lines are flushed as they are written and fsynced at the end of every turn, so a
killed process loses at most the line it was writing; the reader skips such a line.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, TypeAdapter

from codemode.providers.base import AssistantMessage, Message, ToolResultMessage, Usage

SESSIONS_DIR = "sessions"
_MESSAGE = TypeAdapter(Message)


class SessionMeta(BaseModel):
    id: str
    created_at: str
    cwd: str
    provider: str
    model: str
    harness: str
    dialect: str
    cli_version: str = ""


class RolloutError(Exception):
    """A session file that cannot be found or read."""


def new_session_id() -> str:
    """A UUID, as Codex's thread ids are: version 7 (RFC 9562), so ids sort by creation
    time (a millisecond timestamp first) and are unique by 74 random bits."""
    ms = time.time_ns() // 1_000_000
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | secrets.randbits(12) << 64
    value |= 0b10 << 62 | secrets.randbits(62)
    return str(uuid.UUID(int=value))


class Rollout:
    """Appends a session's records to its file.

    A new session's file appears with its first conversation message: records before
    it are held in memory, so a session opened and left without a word (``/new``,
    an interactive session quit at once) leaves no empty file behind.
    """

    def __init__(self, path: Path, handle: IO[str] | None) -> None:
        self.path = path
        self._handle = handle
        self._held: list[str] = []
        # The settings last recorded by this object (None for a resumed file until
        # they change: read them from the file).
        self.meta: SessionMeta | None = None

    @classmethod
    def create(cls, sessions_dir: Path, meta: SessionMeta) -> Rollout:
        path = sessions_dir / f"{meta.id}.jsonl"
        rollout = cls(path, None)
        rollout.record_meta(meta)
        return rollout

    def _open(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("x", encoding="utf-8")
        handle.writelines(self._held)
        self._held = []
        self._handle = handle
        return handle

    @classmethod
    def append_to(cls, path: Path) -> Rollout:
        """Continue an existing file (resume), first ending any half-written line."""
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            cut = f.tell() > 0 and (f.seek(-1, os.SEEK_END) or f.read(1) != b"\n")
        handle = path.open("a", encoding="utf-8")
        if cut:
            handle.write("\n")
        return cls(path, handle)

    def record_message(
        self, message: Message, usage: Usage | None = None, *, prompt: bool = False
    ) -> None:
        """Record a conversation item; ``prompt`` marks the user message starting a turn."""
        record: dict[str, Any] = {"type": "message", "message": message.model_dump(mode="json")}
        if prompt:
            record["prompt"] = True
        if usage is not None:
            record["usage"] = usage.model_dump(mode="json")
        if self._handle is None:
            self._open()
        self._write(record)

    def record_event(self, event: BaseModel) -> None:
        self._write({"type": "event", "event": event.model_dump(mode="json")})

    def record_meta(self, meta: SessionMeta) -> None:
        """Record settings changed mid-session (the interactive /model, /harness,
        /code-mode): when the file is read, the last ``session_meta`` wins."""
        self.meta = meta
        self._write({"type": "session_meta", "meta": meta.model_dump(mode="json")})

    def sync(self) -> None:
        """Make everything written so far durable (called at each turn's end)."""
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None and not self._handle.closed:
            self.sync()
            self._handle.close()

    def _write(self, record: dict[str, Any]) -> None:
        record["ts"] = datetime.now(UTC).isoformat(timespec="milliseconds")
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if self._handle is None:
            self._held.append(line)
            return
        self._handle.write(line)
        self._handle.flush()


class RecordedSession(BaseModel):
    """What a session file holds, read back."""

    path: Path
    meta: SessionMeta
    messages: list[Message]
    usages: list[Usage | None]  # per message: the model usage of an assistant message
    prompt_indexes: list[int]  # the messages that started turns
    item_count: int
    skipped_lines: int = 0


def read_session(path: Path) -> RecordedSession:
    """Read a session file; lines that do not parse (a cut last line) are skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise RolloutError(f"cannot read session {path}: {exc.strerror}") from None
    meta: SessionMeta | None = None
    messages: list[Message] = []
    usages: list[Usage | None] = []
    prompts: list[int] = []
    items = skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record.get("type")
            if kind == "session_meta":
                meta = SessionMeta.model_validate(record["meta"])
            elif kind == "message":
                messages.append(_MESSAGE.validate_python(record["message"]))
                if record.get("prompt"):
                    prompts.append(len(messages) - 1)
                usage = record.get("usage")
                usages.append(Usage.model_validate(usage) if usage else None)
            elif kind == "event" and record["event"].get("type") == "item.started":
                items += 1
        except (ValueError, KeyError, TypeError, AttributeError):
            skipped += 1
    if meta is None:
        raise RolloutError(f"{path} is not a codemode session (no session_meta record)")
    return RecordedSession(
        path=path,
        meta=meta,
        messages=messages,
        usages=usages,
        prompt_indexes=prompts,
        item_count=items,
        skipped_lines=skipped,
    )


def close_dangling_calls(messages: list[Message]) -> list[Message]:
    """Answer tool calls a killed session never answered, so the model sees a
    well-formed conversation (every wire rejects a call without a result)."""
    repaired: list[Message] = []
    pending: list[Any] = []  # calls of the last assistant message still unanswered
    for message in messages:
        if isinstance(message, ToolResultMessage):
            repaired.append(message)
            pending = [c for c in pending if c.id != message.call_id]
            continue
        repaired.extend(_interrupted(c) for c in pending)
        repaired.append(message)
        pending = list(message.tool_calls) if isinstance(message, AssistantMessage) else []
    repaired.extend(_interrupted(c) for c in pending)
    return repaired


def _interrupted(call: Any) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=call.id,
        name=call.name,
        content="interrupted: the session ended before this call finished; "
        "check its effects before repeating it",
        is_error=True,
        freeform=call.freeform,
    )


def find_session(sessions_dir: Path, ref: str | None) -> Path:
    """The session file for an id (or unique prefix, or path); ``None`` = the newest."""
    if ref is not None and (candidate := Path(ref)).suffix == ".jsonl" and candidate.exists():
        return candidate
    files = sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.is_dir() else []
    if ref is None:
        if not files:
            raise RolloutError(f"no sessions recorded yet in {sessions_dir}")
        return max(files, key=lambda p: (p.stat().st_mtime, p.name))
    matches = [p for p in files if p.stem == ref] or [p for p in files if ref in p.stem]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RolloutError(f"no session {ref!r} in {sessions_dir}")
    names = ", ".join(p.stem for p in matches[:5])
    raise RolloutError(f"session id {ref!r} is ambiguous: {names}")


class SessionSummary(BaseModel):
    id: str
    path: Path
    model: str
    dialect: str
    first_prompt: str
    cwd: str = ""  # the workspace it ran in


def list_sessions(sessions_dir: Path) -> list[SessionSummary]:
    """Recorded sessions, newest first; unreadable files are left out."""
    if not sessions_dir.is_dir():
        return []
    files = sorted(sessions_dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    rows = []
    for path in files:
        try:
            recorded = read_session(path)
        except RolloutError:
            continue
        prompts = (recorded.messages[i] for i in recorded.prompt_indexes)
        prompt = next((m.text for m in prompts if not isinstance(m, ToolResultMessage)), "")
        rows.append(
            SessionSummary(
                id=recorded.meta.id,
                path=path,
                model=recorded.meta.model,
                dialect=recorded.meta.dialect,
                cwd=recorded.meta.cwd,
                first_prompt=" ".join(prompt.split())[:60],
            )
        )
    return rows
