"""Showing a session's events in the terminal as they happen.

The model's text streams as markdown: finished paragraphs are printed for good and
only the paragraph being written is redrawn (a live region taller than the screen
cannot be redrawn, so it is kept short). Reasoning is dimmed and collapsed to one line
unless expanded with ``/reasoning``. Each tool call is a compact block; a code-mode
program is shown highlighted, then its console output and nested calls as they happen.
On a non-terminal stdout nothing is redrawn: whole items are printed as plain text.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from codemode.agent.events import (
    AgentMessageItem,
    CodeExecutionItem,
    CommandExecutionItem,
    CommandOutputDeltaEvent,
    ErrorItem,
    FileChangeItem,
    HookRunItem,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    McpToolCallItem,
    Notice,
    OutputDeltaEvent,
    ReasoningDeltaEvent,
    ReasoningItem,
    StreamError,
    TextDeltaEvent,
    ThreadStarted,
    ToolCallItem,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    TurnUsage,
    WorkspaceRecovered,
)
from codemode.agent.printers import describe_args
from codemode.locations import small_files
from codemode.terminal.control_chars import safe_console
from codemode.tools.store import MAX_READ_BYTES
from codemode.tui.activity import Activity, label_for
from codemode.tui.diffs import diff_renderable, unified_diff
from codemode.tui.live_stream import LiveStream

if TYPE_CHECKING:
    from codemode.tools.registry import ToolRegistry

_OUTPUT_LINES = 8  # lines of a command's output shown under it


def make_console() -> Console:
    """The console for the session: colour and redraws only on a terminal; NO_COLOR
    (read by rich) turns colour off; no control sequence from what it shows reaches the
    terminal (``control_chars.safe_console``)."""
    console = safe_console(highlight=False, emoji=False)
    # Piped: lines as long as they are, not folded at an assumed 80 columns.
    console.soft_wrap = not console.is_terminal
    return console


def _text_before(target: Path) -> str:
    """The text a whole-file write is about to replace ("" for a new file), read here,
    in codemode's own process, before the write runs: a command may have left a FIFO, a
    sparse file of terabytes or a link to ``/proc/self/environ`` under the name, so it
    is read as a settings file is (``small_files``: at once, a regular file that is not
    the kernel's, capped); OSError when it is none of those."""
    try:
        return small_files.read_text(target, cap=MAX_READ_BYTES)
    except FileNotFoundError:
        return ""


class TerminalRenderer:
    """A session listener that draws events on ``console``."""

    def __init__(
        self, console: Console, *, show_reasoning: bool = False, workspace: Path | None = None
    ) -> None:
        self.console = console
        self.workspace = workspace
        # The session's tools (set once it is built): a call is drawn from its tool's traits.
        self.tools: ToolRegistry | None = None
        # Whole-file writes in flight: item id -> (path shown, the file's text before).
        self._writes: dict[str, tuple[str, str]] = {}
        self.show_reasoning = show_reasoning
        self._streams: dict[str, LiveStream] = {}
        self._turn_started = 0.0
        # The program running now, and its source: the approver shows it around the
        # nested call that needs approval.
        self.current_program: str | None = None
        self.last_reasoning = ""  # for /reasoning to show in full
        # The spinner line (and a running command's latest output) while a turn runs.
        self.activity = Activity(console)

    # --- plumbing --------------------------------------------------------------------

    def __call__(self, event: BaseModel) -> None:
        kind = getattr(event, "type", "")
        if kind in ("delta.text", "delta.reasoning"):
            self.activity.hide()  # the streaming text is the sign of life now
        else:
            self.flush_streams()
        if kind in ("turn.completed", "turn.failed"):
            self.activity.end_turn()
        handler = getattr(self, "_on_" + kind.replace(".", "_"), None)
        if handler is not None:
            handler(event)
        self._track(event, kind)

    def _track(self, event: BaseModel, kind: str) -> None:
        """Keep the activity line up to date with what the turn waits for."""
        activity = self.activity
        if kind == "turn.started":
            activity.begin_turn()
        elif (
            kind == "item.started"
            and isinstance(event, ItemStarted)
            and (label := label_for(event.item)) is not None
        ):
            activity.started(event.item.id, label)
        elif kind == "item.completed" and isinstance(event, ItemCompleted):
            activity.finished(event.item.id)
        elif kind == "delta.command_output" and isinstance(event, CommandOutputDeltaEvent):
            activity.output(event.item_id, event.text)
        if not any(stream.live is not None for stream in self._streams.values()):
            activity.show()

    def flush_streams(self) -> None:
        """End every live region (before something else is printed or asked)."""
        for item_id, stream in self._streams.items():
            if stream.live is None:
                continue
            if stream.kind == "text":
                rest = stream.finish()
                if rest.strip():
                    self.console.print(self._markdown(rest))
            else:
                self._summarize(item_id, stream)

    def _print(self, *renderables: RenderableType, depth: int = 0) -> None:
        for r in renderables:
            if depth and isinstance(r, Text):
                pad = Text("  " * depth)
                r = Text("\n").join(pad + line for line in r.split("\n"))
            elif depth:
                r = Padding(r, (0, 0, 0, 2 * depth), expand=False)
            self.console.print(r)

    def _markdown(self, text: str) -> Markdown | Text:
        """The model's text: rendered on a terminal, as written elsewhere."""
        return Markdown(text) if self.console.is_terminal else Text(text.rstrip("\n"))

    def note(self, message: str, style: str = "dim") -> None:
        """A line from the interactive session itself (slash commands, hints)."""
        self.flush_streams()
        self.console.print(Text(message, style=style))

    # --- events ----------------------------------------------------------------------

    def _on_thread_started(self, event: ThreadStarted) -> None:
        self.note(f"session {event.thread_id}")

    def _on_turn_started(self, event: TurnStarted) -> None:
        self._turn_started = time.monotonic()
        self._streams.clear()

    def _on_notice(self, event: Notice) -> None:
        self.note(f"! {event.message}", style="yellow")

    def _on_workspace_recovered(self, event: WorkspaceRecovered) -> None:
        self.note(f"! {event.message}", style="yellow")

    def _on_delta_text(self, event: TextDeltaEvent) -> None:
        # The answer starts: the reasoning before it is done.
        for item_id, stream in self._streams.items():
            if stream.kind == "reasoning" and not stream.summarized:
                self._summarize(item_id, stream)
        self._stream(event.item_id, "text").add(event.text)

    def _on_delta_reasoning(self, event: ReasoningDeltaEvent) -> None:
        self._stream(event.item_id, "reasoning").add(event.text)

    def _stream(self, item_id: str, kind: str) -> LiveStream:
        stream = self._streams.get(item_id)
        if stream is None:
            stream = self._streams[item_id] = LiveStream(self.console, kind)
        return stream

    def _on_delta_output(self, event: OutputDeltaEvent) -> None:
        style = "red" if event.level in ("error", "warn") else ""
        self._print(Text(f"│ {event.text}", style=style), depth=1)

    def _on_item_started(self, event: ItemStarted) -> None:
        item = event.item
        depth = 1 if item.parent_id else 0
        if item.type == "command_execution":
            self._print(Text(f"$ {item.command}", style="bold"), depth=depth)
        elif item.type == "code_execution":
            self.current_program = item.code
            self._print(Text("exec", style="bold cyan"))
            self._print(
                Syntax(item.code, "javascript", theme="ansi_dark", line_numbers=True), depth=1
            )
        elif item.type == "tool_call" and self._writes_whole_file(item):
            self._remember_write(item)
        elif item.type == "todo_list":
            for entry in item.items:
                mark = "[x]" if entry.completed else "[ ]"
                self._print(Text(f"{mark} {entry.text}"), depth=depth)

    def _on_item_updated(self, event: ItemUpdated) -> None:
        item = event.item
        if item.type == "code_execution" and item.status == "in_progress":
            # Past its yield time: the program runs on, the model may `wait` for it.
            self._print(Text("… still running (the model can wait for it)", style="dim"), depth=1)

    def _on_item_completed(self, event: ItemCompleted) -> None:
        item = event.item
        depth = 1 if item.parent_id else 0
        handler = getattr(self, "_done_" + item.type, None)
        if handler is not None:
            handler(item, depth)

    def _done_agent_message(self, item: AgentMessageItem, depth: int) -> None:
        stream = self._streams.pop(item.id, None)
        rest = stream.finish(item.text) if stream is not None else item.text
        if rest.strip():
            self.console.print(self._markdown(rest))

    def _done_reasoning(self, item: ReasoningItem, depth: int) -> None:
        stream = self._streams.get(item.id)
        if stream is None:
            stream = self._streams[item.id] = LiveStream(self.console, "reasoning")
        if not stream.summarized:
            stream.text = item.text or stream.text
            self._summarize(item.id, stream)

    def _summarize(self, item_id: str, stream: LiveStream) -> None:
        """Replace a reasoning stream by its summary line (or all of it, if shown)."""
        stream.clear()
        stream.summarized = True
        text = stream.text.strip()
        if not text:
            return
        self.last_reasoning = text
        if self.show_reasoning:
            self._print(Text(text, style="dim italic"))
        else:
            lines = text.splitlines()
            more = f"  (+{len(lines) - 1} lines, /reasoning shows all)" if len(lines) > 1 else ""
            self._print(Text(f"thinking: {lines[0][:150]}{more}", style="dim italic"))

    def _done_command_execution(self, item: CommandExecutionItem, depth: int) -> None:
        if item.exit_code is None:  # it never ran, or was stopped: the output is why
            reason = item.aggregated_output.strip() or "interrupted"
            self._print(Text(f"✗ {reason}", style="red"), depth=depth + 1)
            return
        lines = item.aggregated_output.rstrip("\n").splitlines()
        shown = lines[-_OUTPUT_LINES:]
        if len(lines) > len(shown):
            shown.insert(0, f"… {len(lines) - len(shown)} more lines")
        if shown:
            self._print(Text("\n".join(shown), style="dim"), depth=depth + 1)
        if item.exit_code == 0:
            self._print(Text("✓ exit 0", style="green"), depth=depth + 1)
        else:
            self._print(Text(f"✗ exit {item.exit_code}", style="red"), depth=depth + 1)

    def _done_file_change(self, item: FileChangeItem, depth: int) -> None:
        marks = {"add": "A", "update": "M", "delete": "D", "move": "R"}
        for change in item.changes:
            self._print(Text(f"{marks[change.kind]} {change.path}", style="bold"), depth=depth)
        if item.diff.strip():
            self._print(diff_renderable(item.diff), depth=depth + 1)
        if item.status == "failed":
            self._print(Text("✗ patch failed", style="red"), depth=depth + 1)

    def _writes_whole_file(self, item: ToolCallItem) -> bool:
        """A call of a writing tool (its ``effects``) given a whole file's ``path`` and
        ``content``: shown as the diff it makes."""
        tool = self.tools.get(item.name) if self.tools is not None else None
        args = item.arguments
        return (
            tool is not None
            and "write" in tool.effect_set
            and isinstance(args, dict)
            and isinstance(args.get("path"), str)
            and isinstance(args.get("content"), str)
        )

    def _remember_write(self, item: ToolCallItem) -> None:
        args = item.arguments if isinstance(item.arguments, dict) else {}
        path = args.get("path")
        if self.workspace is None or not isinstance(path, str):
            return
        try:
            before = _text_before(self.workspace / path)
        except (OSError, UnicodeDecodeError):
            return  # no diff: the call is shown as any other
        self._writes[item.id] = (path, before)

    def _done_tool_call(self, item: ToolCallItem, depth: int) -> None:
        written = self._writes.pop(item.id, None)
        if written is not None and item.status == "completed":
            path, before = written
            after = str((item.arguments or {}).get("content", ""))
            kind = "M" if before else "A"
            self._print(Text(f"{kind} {path}", style="bold"), depth=depth)
            diff = unified_diff(path, before, after)
            if diff:
                self._print(diff_renderable(diff), depth=depth + 1)
            return
        args = describe_args(item.arguments, width=100)
        if item.status == "completed":
            line = Text.assemble(("· ", "dim"), (item.name, "bold"), f" {args} ", ("✓", "green"))
        else:
            line = Text.assemble(
                ("· ", "dim"), (item.name, "bold"), f" {args} ", (f"✗ {item.error}", "red")
            )
        self._print(line, depth=depth)

    def _done_mcp_tool_call(self, item: McpToolCallItem, depth: int) -> None:
        ok = item.status == "completed"
        mark = ("✓", "green") if ok else (f"✗ {item.error}", "red")
        self._print(Text.assemble(("· ", "dim"), f"{item.server}.{item.tool} ", mark), depth=depth)

    def _done_hook_run(self, item: HookRunItem, depth: int) -> None:
        # Shown when it refused something; a failure was a notice, an agreement is quiet.
        if item.status == "declined":
            line = f"⛔ {item.event} hook `{item.command}` {item.decision}: {item.reason}"
            self._print(Text(line, style="yellow"), depth=depth)

    def _done_code_execution(self, item: CodeExecutionItem, depth: int) -> None:
        self.current_program = None
        calls = f"{item.tool_calls} tool call{'s' if item.tool_calls != 1 else ''}"
        if item.error:
            self._print(Text(f"✗ error ({calls})", style="red"), depth=1)
            self._print(Text(item.error, style="red"), depth=2)
            return
        if item.value is not None:
            value = json.dumps(item.value, ensure_ascii=False)
            value = value if len(value) <= 200 else value[:197] + "..."
            self._print(Text(f"→ {value}", style="dim"), depth=1)
        self._print(Text(f"✓ done ({calls})", style="green"), depth=1)

    def _done_error(self, item: ErrorItem, depth: int) -> None:
        self._print(Text(f"error: {item.message}", style="red"))

    def _on_turn_completed(self, event: TurnCompleted) -> None:
        self.console.print(Text(self.status_line(event.usage, event.model_requests), style="dim"))

    def _on_turn_failed(self, event: TurnFailed) -> None:
        self.console.print(Text(f"✗ {event.error.message}", style="red"))
        self.console.print(Text(self.elapsed(), style="dim"))

    def _on_error(self, event: StreamError) -> None:
        self.console.print(Text(f"error: {event.message}", style="red"))

    def elapsed(self) -> str:
        return f"{time.monotonic() - self._turn_started:.1f}s"

    def status_line(self, usage: TurnUsage, requests: int) -> str:
        cached = f" ({usage.cached_input_tokens} cached)" if usage.cached_input_tokens else ""
        plural = "s" if requests != 1 else ""
        return (
            f"─ {usage.input_tokens} in{cached} · {usage.output_tokens} out · "
            f"{requests} request{plural} · {self.elapsed()}"
        )
