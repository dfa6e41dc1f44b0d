"""What a tool handler receives besides its arguments, and how it reports failure.

Kept apart from ``base.py`` so that the runtime can hold a context without importing
pydantic (the tool models are loaded only when a tool is first called).
"""

from __future__ import annotations

import os.path
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.sandbox.unconfined import Unconfined
from codemode.tool_terms.errors import ToolError as ToolError  # defined in the leaf; named here too
from codemode.tools.path_chars import refusal

if TYPE_CHECKING:
    from codemode.sandbox.protocols import Sandbox
    from codemode.tools.client import ToolClient
    from codemode.tools.dry_run import DryRun
    from codemode.tools.store import FileStore


@dataclass
class ToolContext:
    """What a handler may know about the session that called it.

    ``sandbox`` is the session's sandbox (``codemode.sandbox.protocols.Sandbox``): every
    command and write goes through it. None given (the default, e.g. for embedders), it
    is an ``Unconfined`` one: commands run unconfined and unchecked, credentials still
    withheld from subprocesses, and the file tools write only inside the workspace and
    ``writable_roots`` (never inside ``.git`` or ``.codemode``, at any depth:
    ``codemode.tools.fs.guard``). ``resolve_writable`` says why a path is refused; the
    race-free walk of ``codemode.tools.fs`` enforces it.
    """

    workspace: Path
    # Extra writable roots beyond the workspace, for the ``Unconfined`` sandbox made when
    # none is given (a sandbox session has its own, from its settings).
    writable_roots: list[Path] = field(default_factory=list)
    # Never None once made (``__post_init__``); None here only means "the default".
    sandbox: Sandbox = None  # type: ignore[assignment]
    # The user's editor (ACP), when a session has one: file I/O and approvals go there.
    client: ToolClient | None = None
    # Set for a dry run: writing tools record changes here instead of on disk, and
    # read_file sees them (codemode.tools.dry_run).
    dry_run: DryRun | None = None
    # The files as this session sees them; None: the layers that ``client`` and
    # ``dry_run`` imply, over the disk (``store_for`` below).
    store: FileStore | None = None
    # Set for one call by whoever shows it live: a command's output chunks as they
    # arrive (codemode.tools.live_output).
    live_output: Callable[[bytes], None] | None = None
    # Set for one call by whoever reports it: an MCP tool's result as its server sent
    # it (content blocks, structuredContent), next to what the program gets back.
    mcp_result: Callable[[list[dict[str, Any]], Any], None] | None = None
    # Set for one call by the registry's last step (``codemode.tools.pipeline``): the
    # tool being called and the code-mode program calling it, so that a command the
    # tool starts is decided, asked about and reported under the right names.
    tool_name: str | None = None
    program: str | None = None

    def __post_init__(self) -> None:
        if self.sandbox is None:
            self.sandbox = Unconfined(self.workspace, self.writable_roots)

    def resolve(self, path: str | Path) -> Path:
        """Resolve ``path`` against the workspace; the result is absolute and normalised.
        A path holding a NUL, a newline or another control character is refused clearly
        (``codemode.tools.path_chars``)."""
        refused = refusal(str(path))
        if refused is not None:
            raise ToolError(refused)
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = self.workspace / p
        return Path(os.path.normpath(p))

    def resolve_writable(self, path: str | Path) -> Path:
        """Resolve ``path`` for writing; refuses anything outside the writable roots.

        Symlinks and ``..`` are resolved before the check; ``.codemode/`` and
        ``.git/hooks`` inside a root stay read-only; in read-only sandbox mode every
        write is refused.
        """
        return self.sandbox.check_writable(self.resolve(path), path)

    def display(self, path: Path) -> str:
        """A path as the program should see it: relative to the workspace when inside."""
        try:
            return path.relative_to(self.workspace).as_posix() or "."
        except ValueError:
            return str(path)


def store_for(ctx: ToolContext) -> FileStore:
    """The store every file tool of ``ctx`` reads and writes through: ``ctx.store`` when
    one was set, else the layers ``ctx`` implies: the disk, under the editor's buffers
    when ``ctx.client`` offers file access, under the dry-run overlay when
    ``ctx.dry_run`` is set (a dry run never reaches the editor: nothing it does may
    change a buffer the user sees). Call it on the event loop: an editor store binds
    to it."""
    if ctx.store is not None:
        return ctx.store
    # Loaded on first use: a context is made for every call, most never touch a file.
    from codemode.tools.store.disk import DiskStore

    disk = DiskStore(ctx)
    if ctx.dry_run is not None:
        from codemode.tools.store.overlay import DryRunStore

        return DryRunStore(ctx.dry_run, disk, ctx.workspace)
    client = ctx.client
    if client is not None and (client.reads_files or client.writes_files):
        from codemode.tools.store.editor import EditorStore

        return EditorStore(client, disk)
    return disk
