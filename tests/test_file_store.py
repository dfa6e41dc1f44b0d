"""The file-store seam (codemode.tools.store): every file tool reads and writes through
the session's store, so a dry run records edit and apply_patch too, an editor session's
edit and apply_patch work on the editor's unsaved buffers (over a real ACP connection),
a patch failing partway changes nothing in any store, and protected paths and the
writable roots are refused through every tool and every store alike."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.core import AgentSideConnection, ClientSideConnection
from acp.schema import FileSystemCapabilities, ReadTextFileResponse, WriteTextFileResponse

from codemode.acp.client import AcpApprover, AcpToolClient
from codemode.acp.server import AcpOptions, CodemodeAcpAgent
from codemode.sandbox.session import SandboxSession
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.dry_run import DryRun
from codemode.tools.dry_run_gate import dry_run_registry
from codemode.tools.registry import ToolRegistry


class Editor:
    """An ACP client holding buffers the user has not saved: reads come from them, writes
    go into them (never to disk), and a path in ``refuse`` cannot be written."""

    def __init__(self, buffers: dict[str, str]) -> None:
        self.buffers = buffers
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.refuse: set[str] = set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append(path)
        if path in self.refuse:
            raise RequestError(-32000, f"{path} is read-only in the editor")
        self.buffers[path] = content
        return WriteTextFileResponse()


@dataclass
class EditorSession:
    editor: Editor
    ctx: ToolContext


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
async def editor_session(ws: Path) -> AsyncIterator[EditorSession]:
    """A ToolContext whose client is the real ACP client over a socket pair."""
    left, right = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=left)
    client_reader, client_writer = await asyncio.open_connection(sock=right)
    editor = Editor({})
    agent_conn = AgentSideConnection(CodemodeAcpAgent(AcpOptions()), agent_writer, agent_reader)
    ClientSideConnection(editor, client_writer, client_reader)

    async def flush() -> None:
        pass

    approver = AcpApprover(agent_conn, "s1", open_call_for=lambda tool: None, flush=flush)
    fs = FileSystemCapabilities(read_text_file=True, write_text_file=True)
    client = AcpToolClient(agent_conn, "s1", fs, approver)
    yield EditorSession(editor, ToolContext(workspace=ws, client=client))
    for writer in (agent_writer, client_writer):
        writer.close()


def registry() -> ToolRegistry:
    """The built-in tools plus ``edit`` (which harnesses add), behind the dry-run gate."""
    tools = builtin_registry()
    tools.add_lazy("edit", "codemode.tools.edit:EDIT")
    return dry_run_registry(tools)


async def call(ctx: ToolContext, tool: str, **args: Any) -> Any:
    return await registry().invoke(tool, args, ctx)


async def refusal(ctx: ToolContext, tool: str, **args: Any) -> str:
    with pytest.raises(ToolError) as info:
        await call(ctx, tool, **args)
    return str(info.value)


def update(path: str, old: str, new: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"


# --- dry runs ------------------------------------------------------------------------


async def test_edit_and_apply_patch_in_a_dry_run_change_no_file_and_show_in_the_diff(
    ws: Path,
) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    ctx = ToolContext(workspace=ws, dry_run=DryRun())
    edited = await call(ctx, "edit", path="a.txt", old_string="two", new_string="TWO")
    assert edited["replacements"] == 1
    # The patch applies to the edited text (the overlay), not to the disk.
    await call(ctx, "apply_patch", input=update("a.txt", "TWO", "2"))
    await call(ctx, "edit", path="new.txt", old_string="", new_string="made\n")
    assert (await call(ctx, "read_file", path="a.txt"))["content"] == "one\n2\n"
    assert (ws / "a.txt").read_text() == "one\ntwo\n"
    assert not (ws / "new.txt").exists()
    assert ctx.dry_run is not None
    assert ctx.dry_run.changed_paths(ws) == ["a.txt", "new.txt"]
    diff = ctx.dry_run.diff(ws)
    assert "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n" in diff
    assert "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+made\n" in diff
    # An edit that does not match is refused, as on disk.
    assert "not found" in await refusal(ctx, "edit", path="a.txt", old_string="two", new_string="x")


async def test_a_dry_run_patch_refused_partway_records_nothing(ws: Path) -> None:
    """The plan accepts .git/objects (git itself writes there) but the file tools never
    write inside .git: the overlay refuses the second write after recording the first,
    and takes the first back, as a real run rolls its write back."""
    (ws / ".git" / "objects").mkdir(parents=True)
    patch = (
        "*** Begin Patch\n*** Add File: first.txt\n+1\n"
        "*** Add File: .git/objects/x\n+2\n*** End Patch\n"
    )
    dry = ToolContext(workspace=ws, dry_run=DryRun())
    assert ".git/ is read-only" in await refusal(dry, "apply_patch", input=patch)
    assert dry.dry_run is not None and dry.dry_run.changes() == []
    real = ToolContext(workspace=ws)
    assert ".git/ is read-only" in await refusal(real, "apply_patch", input=patch)
    assert not (ws / "first.txt").exists()
    assert list((ws / ".git" / "objects").iterdir()) == []


# --- editor buffers --------------------------------------------------------------------


async def test_edit_in_an_editor_session_reads_and_writes_the_unsaved_buffer(
    ws: Path, editor_session: EditorSession
) -> None:
    editor, ctx = editor_session.editor, editor_session.ctx
    notes = ws / "notes.txt"
    notes.write_text("saved line\n")
    editor.buffers[str(notes)] = "unsaved line\n"
    result = await call(ctx, "edit", path="notes.txt", old_string="unsaved", new_string="edited")
    assert result == {"path": "notes.txt", "replacements": 1, "created": False}
    assert editor.buffers[str(notes)] == "edited line\n"
    assert notes.read_text() == "saved line\n"  # the editor saves, not we
    # The saved text is not what an edit sees: it is not found in the buffer.
    message = await refusal(ctx, "edit", path="notes.txt", old_string="saved", new_string="x")
    assert "not found" in message
    assert str(notes) in editor.reads


async def test_apply_patch_in_an_editor_session_works_on_the_buffers(
    ws: Path, editor_session: EditorSession
) -> None:
    editor, ctx = editor_session.editor, editor_session.ctx
    (ws / "a.txt").write_text("alpha\nsaved\n")
    editor.buffers[str(ws / "a.txt")] = "alpha\nunsaved\n"
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n-unsaved\n+patched\n"
        "*** Add File: sub/b.txt\n+new\n*** End Patch\n"
    )
    result = await call(ctx, "apply_patch", input=patch)
    assert [c["kind"] for c in result["changes"]] == ["update", "add"]
    assert editor.buffers[str(ws / "a.txt")] == "alpha\npatched\n"
    assert editor.buffers[str(ws / "sub" / "b.txt")] == "new\n"
    assert (ws / "a.txt").read_text() == "alpha\nsaved\n"
    assert not (ws / "sub").exists()
    # Through the shell tool's apply_patch heredoc, the same store.
    heredoc = "apply_patch <<'EOF'\n" + update("a.txt", "patched", "again") + "EOF\n"
    shell = await call(ctx, "shell", command=heredoc)
    assert shell["exit_code"] == 0, shell
    assert editor.buffers[str(ws / "a.txt")] == "alpha\nagain\n"


async def test_apply_patch_failing_partway_in_the_editor_restores_every_buffer(
    ws: Path, editor_session: EditorSession
) -> None:
    editor, ctx = editor_session.editor, editor_session.ctx
    for name in ("a.txt", "b.txt"):
        (ws / name).write_text(f"{name} saved\n")
        editor.buffers[str(ws / name)] = f"{name} unsaved\n"
    editor.refuse.add(str(ws / "b.txt"))
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-a.txt unsaved\n+A\n"
        "*** Update File: b.txt\n@@\n-b.txt unsaved\n+B\n*** Add File: c.txt\n+C\n"
        "*** End Patch\n"
    )
    message = await refusal(ctx, "apply_patch", input=patch)
    assert "Writing b.txt failed" in message and "restored" in message
    assert "read-only in the editor" in message
    assert editor.buffers[str(ws / "a.txt")] == "a.txt unsaved\n"  # written, then restored
    assert editor.buffers[str(ws / "b.txt")] == "b.txt unsaved\n"
    assert str(ws / "c.txt") not in editor.buffers
    assert editor.writes == [str(ws / "a.txt"), str(ws / "b.txt"), str(ws / "a.txt")]
    for name in ("a.txt", "b.txt"):
        assert (ws / name).read_text() == f"{name} saved\n"
    assert not (ws / "c.txt").exists()


async def test_the_editor_is_never_asked_for_what_the_tools_may_not_read(
    ws: Path, editor_session: EditorSession
) -> None:
    editor, ctx = editor_session.editor, editor_session.ctx
    message = await refusal(ctx, "read_file", path="/proc/self/environ")
    assert "not readable by the file tools" in message
    os.mkfifo(ws / "fifo")
    assert "FIFO" in await refusal(ctx, "read_file", path="fifo")
    assert "no such file" in await refusal(ctx, "read_file", path="missing.txt")
    assert editor.reads == []


# --- the writable roots and protected paths, through every tool and store ---------------

STORES = ("disk", "dry-run", "editor")
PATHS = (".git/config", "sub/.codemode/rules/x.rules", "hooks/pre-commit", "../outside/f.txt")


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("path", PATHS)
async def test_protected_paths_and_the_roots_are_refused_through_every_tool(
    ws: Path, editor_session: EditorSession, store: str, path: str
) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "hooks").symlink_to(ws / ".git" / "hooks")
    (ws.parent / "outside").mkdir()
    target = Path(os.path.normpath(ws / path))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("old\n")
    ctx = (
        ToolContext(workspace=ws)
        if store == "disk"
        else ToolContext(workspace=ws, dry_run=DryRun())
        if store == "dry-run"
        else editor_session.ctx
    )
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": path, "content": "new\n"}),
        ("edit", {"path": path, "old_string": "old", "new_string": "new"}),
        ("apply_patch", {"input": update(path, "old", "new")}),
        ("apply_patch", {"input": f"*** Begin Patch\n*** Delete File: {path}\n*** End Patch\n"}),
    ]
    for tool, args in calls:
        message = await refusal(ctx, tool, **args)
        assert "read-only" in message or "outside" in message, (tool, message)
    assert target.read_text() == "old\n"
    assert editor_session.editor.writes == []
    if ctx.dry_run is not None:
        assert ctx.dry_run.changes() == []


# --- asking the user about a write outside the roots ----------------------------------


async def test_a_write_outside_the_roots_is_asked_through_the_sandbox_approver(
    tmp_path: Path, ws: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / ".git").mkdir(parents=True)
    asked: list[Any] = []
    answers = ["once", "deny", "always"]

    async def approver(request: Any) -> str:
        asked.append(request)
        return answers.pop(0)

    sandbox = SandboxSession(
        ws, {"sandbox_mode": "workspace-write", "approval_policy": "on-request"}, approver=approver
    )
    ctx = ToolContext(workspace=ws, sandbox=sandbox)
    await call(ctx, "write_file", path=str(outside / "a.txt"), content="a\n")
    assert (outside / "a.txt").read_text() == "a\n"
    assert asked[0].tool == "write_file" and str(outside / "a.txt") in asked[0].command
    assert "outside the writable roots" in (asked[0].justification or "")
    # "once" was for that file only.
    message = await refusal(
        ctx, "edit", path=str(outside / "a.txt"), old_string="a", new_string="b"
    )
    assert "declined" in message and asked[1].tool == "edit"
    assert (outside / "a.txt").read_text() == "a\n"
    # A protected path is never offered, outside the roots or not, nor through a link.
    (outside / "cfg").symlink_to(outside / ".git")
    for protected in (outside / ".git" / "config", outside / "cfg" / "config"):
        message = await refusal(ctx, "write_file", path=str(protected), content="x")
        assert "outside" in message and len(asked) == 2
    assert list((outside / ".git").iterdir()) == []
    # "always" makes the directory writable for the session: no more questions.
    await call(ctx, "edit", path=str(outside / "a.txt"), old_string="a", new_string="b")
    await call(ctx, "write_file", path=str(outside / "c.txt"), content="c\n")
    assert (outside / "a.txt").read_text() == "b\n" and (outside / "c.txt").exists()
    assert len(asked) == 3
    # apply_patch is never asked: it refuses.
    other = tmp_path / "other"
    other.mkdir()
    patch = f"*** Begin Patch\n*** Add File: {other / 'p.txt'}\n+p\n*** End Patch\n"
    assert "outside the workspace" in await refusal(ctx, "apply_patch", input=patch)
    assert len(asked) == 3 and not (other / "p.txt").exists()


@pytest.mark.parametrize(
    "settings",
    [
        {"sandbox_mode": "workspace-write", "approval_policy": "never"},
        {"sandbox_mode": "read-only", "approval_policy": "on-request"},
    ],
)
async def test_no_question_when_the_policy_or_the_mode_rules_it_out(
    tmp_path: Path, ws: Path, settings: dict[str, str]
) -> None:
    asked: list[Any] = []

    async def approver(request: Any) -> str:
        asked.append(request)
        return "once"

    ctx = ToolContext(workspace=ws, sandbox=SandboxSession(ws, settings, approver=approver))
    target = tmp_path / "outside.txt"
    assert "refusing to write" in await refusal(ctx, "write_file", path=str(target), content="x")
    assert asked == [] and not target.exists()


async def test_list_dir_in_a_dry_run_shows_the_recorded_files(ws: Path) -> None:
    (ws / "kept.txt").write_text("k\n")
    (ws / "gone.txt").write_text("g\n")
    ctx = ToolContext(workspace=ws, dry_run=DryRun())
    await call(ctx, "write_file", path="new/deep/f.txt", content="abc")
    await call(ctx, "write_file", path="kept.txt", content="longer\n")
    await call(
        ctx, "apply_patch", input="*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n"
    )
    listed = await call(ctx, "list_dir", path=".", depth=3)
    assert listed["entries"] == [
        {"path": "kept.txt", "type": "file", "size": 7},
        {"path": "new", "type": "dir", "size": None},
        {"path": "new/deep", "type": "dir", "size": None},
        {"path": "new/deep/f.txt", "type": "file", "size": 3},
    ]
    assert (await call(ctx, "list_dir", path="new/deep"))["entries"][0]["path"] == "f.txt"
    assert sorted(p.name for p in ws.iterdir()) == ["gone.txt", "kept.txt"]


async def test_list_dir_of_proc_self_lists_and_read_file_still_refuses(ws: Path) -> None:
    ctx = ToolContext(workspace=ws)
    listed = await call(ctx, "list_dir", path="/proc/self")
    assert "environ" in [e["path"] for e in listed["entries"]]
    assert "not readable" in await refusal(ctx, "read_file", path="/proc/self/environ")


async def test_grep_and_glob_in_a_dry_run_search_what_the_run_wrote(ws: Path) -> None:
    # A program that writes a file and then searches finds its own change, and not the
    # file it removed, as every other file tool of the dry run does.
    (ws / "kept.txt").write_text("needle old\n")
    (ws / "gone.txt").write_text("needle gone\n")
    ctx = ToolContext(workspace=ws, dry_run=DryRun())
    await call(ctx, "write_file", path="new/deep/f.txt", content="a needle here\n")
    await call(ctx, "write_file", path="kept.txt", content="changed\nneedle new\n")
    await call(
        ctx, "apply_patch", input="*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n"
    )
    found = await call(ctx, "grep", pattern="needle", path=".")
    assert [(m["path"], m["line"], m["text"]) for m in found["matches"]] == [
        ("kept.txt", 2, "needle new"),
        ("new/deep/f.txt", 1, "a needle here"),
    ]
    assert (await call(ctx, "grep", pattern="needle", path="new"))["files_searched"] == 1
    one = await call(ctx, "grep", pattern="here", path="new/deep/f.txt")
    assert [m["line"] for m in one["matches"]] == [1]
    assert "no such file" in await refusal(ctx, "grep", pattern="x", path="gone.txt")
    assert (await call(ctx, "glob", pattern="**/*.txt"))["matches"] == [
        "kept.txt",
        "new/deep/f.txt",
    ]
    assert (await call(ctx, "glob", pattern="new/**/*.txt"))["matches"] == ["new/deep/f.txt"]
    # The disk is as it was, and a search outside the dry run sees it so.
    assert sorted(p.name for p in ws.iterdir()) == ["gone.txt", "kept.txt"]
    plain = await call(ToolContext(workspace=ws), "grep", pattern="needle", path=".")
    assert sorted(m["path"] for m in plain["matches"]) == ["gone.txt", "kept.txt"]
