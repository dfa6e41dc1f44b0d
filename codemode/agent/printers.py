"""Showing a session's events: plain progress text, or JSON Lines for machines."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel

from codemode.agent.codex_json import codex_event
from codemode.agent.events import (
    ItemCompleted,
    ItemStarted,
    Notice,
    OutputDeltaEvent,
    ThreadStarted,
    TurnCompleted,
    TurnFailed,
    WorkspaceRecovered,
    is_public,
)
from codemode.terminal.control_chars import visible

_OUTPUT_LINES = 6  # lines of command output shown under a command


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or no such method
        return False


def describe_args(args: object, width: int = 120) -> str:
    """Tool-call arguments as one line of at most ``width`` characters."""
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


def _near(path: str) -> str:
    """An absolute path, relative to the current directory when it is under it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


class JsonPrinter:
    """``--json``: one public event per line on stdout, flushed as it happens. Notices
    (a skipped hook, a compaction, a setting not sent), which Codex's event stream has
    no place for, go to stderr as ``note:`` lines, as they do without ``--json``."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def __call__(self, event: BaseModel) -> None:
        if isinstance(event, Notice):
            self.err.write(f"note: {visible(event.message)}\n")
            self.err.flush()
            return
        if not is_public(event):
            return
        data = codex_event(event)
        if data.get("type") == "turn.failed":
            # Codex reports the failure as an error event first, then the turn's end.
            self._write({"type": "error", "message": data["error"]["message"]})
        self._write(data)

    def _write(self, data: dict[str, object]) -> None:
        self.out.write(json.dumps(data, ensure_ascii=False) + "\n")
        self.out.flush()


class HumanPrinter:
    """Progress on stderr as plain text; the turn's final answer on stdout.

    An agent message is held back until something follows it: if the turn then ends,
    it was the answer (stdout); if a tool call follows, it was commentary (stderr).
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._held: str | None = None
        # The item whose line was printed last: a command's result that does not follow
        # its own "$ command" line (concurrent calls) names the command again.
        self._last: str | None = None

    def __call__(self, event: BaseModel) -> None:
        kind = getattr(event, "type", "")
        handler = getattr(self, "_on_" + kind.replace(".", "_"), None)
        if handler is not None:
            handler(event)
            item = getattr(event, "item", None)
            self._last = getattr(item, "id", None)

    def _say(self, text: str, depth: int = 0) -> None:
        pad = "  " * depth
        # progress is for a person: nothing in it (command output, a file name, the
        # model's words) may drive the terminal; one write for all its lines (each
        # write wakes whoever reads the other end)
        lines = visible(text).splitlines() or [""]
        self.err.write("".join(f"{pad}{line}\n" for line in lines))
        self.err.flush()

    def _release_held(self) -> None:
        if self._held is not None:
            self._say(self._held)
            self._held = None

    def _on_thread_started(self, event: ThreadStarted) -> None:
        self._say(f"session {event.thread_id}")

    def _on_notice(self, event: Notice) -> None:
        self._say(f"! {event.message}")

    def _on_workspace_recovered(self, event: WorkspaceRecovered) -> None:
        self._say(f"! {event.message}")

    def _on_delta_output(self, event: OutputDeltaEvent) -> None:
        self._say(f"> {event.text}", depth=1)

    def _on_item_started(self, event: ItemStarted) -> None:
        self._release_held()
        item = event.item
        depth = 1 if item.parent_id else 0
        if item.type == "command_execution":
            self._say(f"$ {item.command}", depth)
        elif item.type == "code_execution":
            self._say("exec:")
            self._say("\n".join(f"│ {line}" for line in item.code.splitlines()), 1)

    def _on_item_completed(self, event: ItemCompleted) -> None:
        item = event.item
        depth = 1 if item.parent_id else 0
        if item.type == "agent_message":
            self._release_held()
            self._held = item.text
        elif item.type == "reasoning":
            first = item.text.strip().splitlines()[0] if item.text.strip() else ""
            self._say(f"thinking: {first[:160]}")
        elif item.type == "command_execution":
            if self._last != item.id:
                self._say(f"$ {item.command.splitlines()[0] if item.command else ''}", depth)
            lines = item.aggregated_output.rstrip("\n").splitlines()
            if item.exit_code is None:
                # It never exited: cancelled, refused or failed to start; the output
                # is the reason.
                self._say("\n".join(lines) or item.status, depth + 1)
                return
            shown = lines[-_OUTPUT_LINES:]
            if len(lines) > len(shown):
                shown.insert(0, f"[... {len(lines) - len(shown)} lines]")
            self._say("\n".join([*shown, f"exit {item.exit_code}"]), depth + 1)
        elif item.type == "file_change":
            marks = {"add": "A", "update": "M", "delete": "D", "move": "R"}
            for change in item.changes:
                where = _near(change.path)
                if change.move_to:
                    where += f" -> {_near(change.move_to)}"
                self._say(f"{marks[change.kind]} {where}", depth + 1)
            if item.status == "failed":
                self._say("patch failed", depth + 1)
        elif item.type == "todo_list":
            for entry in item.items:
                self._say(f"[{'x' if entry.completed else ' '}] {entry.text}", depth)
        elif item.type == "tool_call":
            status = "ok" if item.status == "completed" else f"failed: {item.error}"
            self._say(f"· {item.name} {describe_args(item.arguments)} {status}", depth)
        elif item.type == "mcp_tool_call":
            status = "ok" if item.status == "completed" else f"failed: {item.error}"
            name = f"{item.server}.{item.tool}"
            self._say(f"· {name} {describe_args(item.arguments)} {status}", depth)
        elif item.type == "hook_run" and item.status == "declined":
            # (a hook that failed was a notice already; one that agreed says nothing)
            self._say(f"· {item.event} hook `{item.command}` {item.decision}: {item.reason}",
                      depth)
        elif item.type == "code_execution":
            calls = f"{item.tool_calls} tool call{'s' if item.tool_calls != 1 else ''}"
            if item.error:
                self._say(f"error ({calls}):\n{item.error}", 1)
            else:
                self._say(f"done ({calls})", 1)

    def _on_turn_completed(self, event: TurnCompleted) -> None:
        if self._held is not None:
            # the answer as it is for a pipe or a file (it is the command's result),
            # shown, not obeyed, on a terminal
            print(visible(self._held) if _is_terminal(self.out) else self._held, file=self.out)
            self.out.flush()
            self._held = None
        u = event.usage
        cached = f" ({u.cached_input_tokens} cached)" if u.cached_input_tokens else ""
        self._say(
            f"tokens: {u.input_tokens} in{cached}, {u.output_tokens} out · "
            f"{event.model_requests} model request{'s' if event.model_requests != 1 else ''}"
        )

    def _on_turn_failed(self, event: TurnFailed) -> None:
        self._release_held()
        self._say(f"error: {event.error.message}")
