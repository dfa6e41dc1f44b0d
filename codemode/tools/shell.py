"""The ``shell`` tool: run one command non-interactively and collect its output.

The command runs in its own session (process group) so that on timeout or cancellation
everything it started can be killed together, background jobs included. stdout and
stderr share one pipe so the output reads in the order it was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from codemode.sandbox.server.pidfd_process import ChildProcess
from codemode.tool_terms.elide import elide_middle, join_elided
from codemode.tools import rendering
from codemode.tools.base import StrictArgs, Tool, ToolContext, ToolError, ToolResult
from codemode.tools.live_output import Feed

# Most characters of output returned; beyond this the middle is elided.
MAX_OUTPUT_CHARS = 1_000_000
TIMEOUT_EXIT_CODE = 124  # what coreutils' timeout(1) reports, so the number is familiar
# Once the shell has exited, how long leftover background processes that still hold
# the output pipe get to finish writing before they are killed.
_DRAIN_GRACE_S = 0.5
_READ_CHUNK = 64 * 1024

# Keep commands from paging, colouring or otherwise assuming a human at a terminal.
_ENV_OVERRIDES = {"PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb", "NO_COLOR": "1"}


class ShellArgs(StrictArgs):
    command: str = Field(
        description="Command line run with `bash -c` (or `sh -c` where bash is missing). "
        "It gets no stdin and no terminal; pipes, && and redirects all work."
    )
    workdir: str | None = Field(
        default=None,
        description="Directory to run in, relative to the workspace or absolute; "
        "the workspace if omitted.",
    )
    timeout_ms: int = Field(
        default=10_000,
        gt=0,
        description="Milliseconds before the command and everything it started are killed.",
    )


class ShellResult(ToolResult):
    exit_code: int = Field(
        description="The command's exit status: 0 is success, 128+N means killed by "
        f"signal N, and {TIMEOUT_EXIT_CODE} means it timed out."
    )
    output: str = Field(description="stdout and stderr together, in the order they were written.")
    truncated: bool = Field(
        description=f"True when the output exceeded {MAX_OUTPUT_CHARS} characters and its "
        "middle was replaced by a marker line."
    )
    duration_ms: float = Field(description="Wall-clock time the command took.")
    timed_out: bool = Field(description="True when the command was killed for running too long.")


async def spawn(
    command: str, cwd: Path, env: Mapping[str, str], output_fd: int, ctx: ToolContext
) -> ChildProcess:
    """Start the shell command line ``command`` in a new session, stdout and stderr both
    writing to ``output_fd``.

    This is the only place a process is created: through the context's sandbox
    (``codemode.sandbox.protocols.Sandbox``), which checks it against the execpolicy,
    asks for approval if needed and starts it confined (``SandboxSession``), or starts
    it as it is (``Unconfined``). Either way the child does not inherit credentials
    (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``...).
    """
    return await ctx.sandbox.spawn(
        command, cwd=cwd, env=env, output_fd=output_fd, tool=ctx.tool_name, program=ctx.program
    )


class OutputCapture:
    """Keeps the start and end of a byte stream, counting what falls in between.

    Memory stays bounded however much a command prints. The windows are kept in bytes
    and sized so that even 4-byte UTF-8 characters fill half of MAX_OUTPUT_CHARS each.
    """

    _WINDOW = 2 * MAX_OUTPUT_CHARS

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped_chars = 0  # characters discarded between head and tail

    def add(self, chunk: bytes) -> None:
        room = self._WINDOW - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self._WINDOW
        if excess > 0:
            # Count characters, not bytes: UTF-8 continuation bytes don't start one.
            self.dropped_chars += excess - _count_continuations(self.tail[:excess])
            del self.tail[:excess]

    def text(self) -> tuple[str, bool]:
        """The output, decoded and cut to MAX_OUTPUT_CHARS; and whether it was cut."""
        if not self.dropped_chars:
            whole = (self.head + self.tail).decode("utf-8", errors="replace")
            return elide_middle(whole, MAX_OUTPUT_CHARS)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        half = MAX_OUTPUT_CHARS // 2
        elided = self.dropped_chars + max(0, len(head) - half) + max(0, len(tail) - half)
        return join_elided(head[:half], elided, tail[-half:]), True


_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def _count_continuations(data: bytes | bytearray) -> int:
    return len(data) - len(data.translate(None, _CONTINUATION_BYTES))




def kill_group(proc: ChildProcess) -> None:
    """Stop a confined command and everything it started."""
    kill_tree = getattr(proc, "kill_tree", None)
    if kill_tree is not None:  # a command in the sandbox's command server
        kill_tree()
        return
    # start_new_session made the shell a group leader, so its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class OutputReader:
    """Reads the output pipe from the event loop as it becomes readable, into a
    ``OutputCapture`` (and the live display, when the caller has one); ``eof`` is done once
    every writer has closed its end. Bounded like the capture: each chunk is taken in
    as it is read (no buffer, no task of its own: a command's whole output often
    arrives in one read)."""

    def __init__(self, fd: int, capture: OutputCapture, live: Feed | None) -> None:
        self._fd = fd
        self._capture = capture
        self._live = live
        self._loop = asyncio.get_running_loop()
        self.eof: asyncio.Future[None] = self._loop.create_future()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, _READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._loop.remove_reader(self._fd)
            if not self.eof.done():
                self.eof.set_result(None)
            return
        self._capture.add(chunk)
        if self._live is not None:
            self._live(chunk)

    async def drained(self, timeout_s: float) -> bool:
        """Whether the end of the output came within ``timeout_s``."""
        if not self.eof.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.eof), timeout_s)
        return self.eof.done()

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(ValueError, RuntimeError):  # (a loop already closed)
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1


async def run_shell(args: ShellArgs, ctx: ToolContext) -> ShellResult:
    """Run ``args.command`` and return its exit code and combined output.

    (``apply_patch <<'EOF' ...`` never gets here through a registry: the pipeline's
    route stage sends it to the patch engine, ``codemode.tools.patch.intercept``.)"""
    cwd = ctx.resolve(args.workdir) if args.workdir is not None else ctx.workspace
    if not cwd.is_dir():
        raise ToolError(f"shell: workdir is not a directory: {ctx.display(cwd)}")
    env = {**os.environ, **_ENV_OVERRIDES}

    # Our own pipe rather than stdout=PIPE: asyncio's Process.wait() may wait for its
    # pipes to close, which a leftover background job can postpone indefinitely.
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        proc = await spawn(args.command, cwd, env, write_fd, ctx)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child has its copy; ours would keep EOF from arriving

    capture = OutputCapture()
    reader: OutputReader | None = None
    timed_out = False
    finished = False
    try:
        reader = OutputReader(read_fd, capture, ctx.live_output)
        try:
            async with asyncio.timeout(args.timeout_ms / 1000):
                await proc.wait()
                if not await reader.drained(_DRAIN_GRACE_S):
                    # The shell is gone but something it started still holds the pipe.
                    kill_group(proc)
        except TimeoutError:
            timed_out = True
            kill_group(proc)
        # After a kill the pipe closes promptly; collect what was written up to then.
        await reader.drained(_DRAIN_GRACE_S)
        await proc.wait()
        finished = True
    finally:
        if not finished:  # cancelled (or failed): leave nothing running behind us
            kill_group(proc)
            # Reap it too: a child still unreaped when the event loop closes makes
            # asyncio's child watcher complain on stderr ("Loop ... is closed").
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), _DRAIN_GRACE_S)
        if reader is not None:
            reader.close()
        else:
            os.close(read_fd)
        # what the sandbox put back (protected git files the command changed)
        notes = ctx.sandbox.after_command(proc)

    duration_ms = (time.monotonic() - started) * 1000
    output, truncated = capture.text()
    notes += ctx.sandbox.explain_refusals(output)
    if notes:
        output += ("" if not output or output.endswith("\n") else "\n") + "\n".join(notes) + "\n"
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return ShellResult(
        exit_code=TIMEOUT_EXIT_CODE if timed_out else (128 - code if code < 0 else code),
        output=output,
        truncated=truncated,
        duration_ms=round(duration_ms, 1),
        timed_out=timed_out,
    )


SHELL = Tool(
    name="shell",
    description=(
        "Run a shell command in the workspace and return its exit code and combined "
        "stdout/stderr. Non-interactive: no stdin, no terminal, pagers disabled. The "
        "command and any processes it started are killed when timeout_ms runs out."
    ),
    args_model=ShellArgs,
    result_model=ShellResult,
    handler=run_shell,
    effects=frozenset({"execute"}),
    item="command_execution",
    acp_kind="execute",
    hook_names=("Bash",),
    render=rendering.shell,
    core=True,
)
