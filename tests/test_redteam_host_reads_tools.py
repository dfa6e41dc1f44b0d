"""``list_dir`` over a folder a confined command flooded with entries: the listing runs in
codemode's own process, so what it costs must not grow with the folder (a command makes
millions of empty files in a minute), and the model must be told the listing was cut.
And ``read_file`` in an editor session: a file the store would refuse is not asked of
the editor either."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp.core import AgentSideConnection, ClientSideConnection
from acp.schema import FileSystemCapabilities, ReadTextFileResponse

from codemode.acp.client import AcpApprover, AcpToolClient
from codemode.acp.server import AcpOptions, CodemodeAcpAgent
from codemode.tools import rendering
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.list_dir import MAX_LIST_ENTRIES, MAX_SCANNED_ENTRIES
from tests.file_tools_support import call


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    """The workspace, on a memory filesystem where there is one: a busy disk makes
    a hundred thousand entries in a minute, too slow for a test (the listing itself is
    what is measured, not the disk)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        w = Path(tempfile.mkdtemp(prefix="codemode-test-flood-", dir="/dev/shm"))
    else:
        w = tmp_path / "ws"
        w.mkdir()
    yield w
    # rm, not shutil.rmtree: the deep chain is past Python's recursion limit.
    subprocess.run(["rm", "-rf", "--", str(w)], check=True)


def _flood(folder: Path, count: int, prefix: str = "f") -> Path:
    """``folder`` holding ``count`` entries: links leading nowhere, which a command makes
    many times faster than files (an entry is an entry to a listing)."""
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(count):
            os.symlink("nowhere", f"{prefix}{i:07d}", dir_fd=fd)
    finally:
        os.close(fd)
    return folder


def _listed(ws: Path, **args: Any) -> tuple[dict[str, Any], int]:
    """The listing, and the most memory (bytes, Python's own) it took at once."""
    tracemalloc.start()
    try:
        result = asyncio.run(call(ws, "list_dir", **args))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def test_a_flooded_folder_costs_no_more_than_one_a_quarter_its_size(ws: Path) -> None:
    """Both folders hold more entries than a listing looks at: the larger one must cost
    about the same memory, not four times as much (before, every entry was held)."""
    assert MAX_SCANNED_ENTRIES < 25_000
    _flood(ws / "some", 25_000)
    _flood(ws / "many", 100_000)
    some, some_peak = _listed(ws, path="some")
    many, many_peak = _listed(ws, path="many")
    for listing in (some, many):
        assert listing["truncated"] is True
        assert len(listing["entries"]) == MAX_LIST_ENTRIES
        assert "more than" in (listing["note"] or ""), listing["note"]
    assert many_peak < 2 * some_peak, (some_peak, many_peak)


def test_the_cut_is_said_in_the_text_the_model_reads(ws: Path) -> None:
    _flood(ws / "many", MAX_SCANNED_ENTRIES + 10)
    listing, _ = _listed(ws, path="many")
    text = rendering.list_dir(listing)
    assert text.splitlines()[-1] == f"({listing['note']})"
    assert f"more than {MAX_SCANNED_ENTRIES} entries" in text


def test_a_folder_below_the_scan_limit_lists_its_first_entries_by_name(ws: Path) -> None:
    _flood(ws / "some", MAX_LIST_ENTRIES + 500)
    listing, _ = _listed(ws, path="some")
    assert listing["truncated"] is True
    assert [e["path"] for e in listing["entries"]] == [f"f{i:07d}" for i in range(MAX_LIST_ENTRIES)]
    assert f"stopped at {MAX_LIST_ENTRIES} entries" in listing["note"]


def test_a_listing_that_is_whole_says_nothing_more(ws: Path) -> None:
    _flood(ws / "few", 3)
    listing, _ = _listed(ws, path="few")
    assert listing["truncated"] is False and listing["note"] is None
    assert rendering.list_dir(listing) == "f0000000\nf0000001\nf0000002"


def test_the_scan_limit_is_shared_by_the_folders_below(ws: Path) -> None:
    """Many folders each under the limit add up: together they are cut as one. Their
    entries are hidden (not listed): only the scan limit can cut them, not the cap on
    what is listed."""
    top = ws / "top"
    top.mkdir()
    per = MAX_SCANNED_ENTRIES // 4
    for name in ("a", "b", "c", "d", "e"):
        _flood(top / name, per, prefix=".h")
    listing, _ = _listed(ws, path="top", depth=2)
    assert listing["truncated"] is True and "more than" in listing["note"]


def test_a_deep_chain_is_listed_only_as_deep_as_asked(ws: Path) -> None:
    here = ws / "chain"
    here.mkdir()
    fd = os.open(here, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):  # deeper than any path the kernel takes
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    listing, _ = _listed(ws, path="chain", depth=5)
    assert [e["path"] for e in listing["entries"]] == ["d", "d/d", "d/d/d", "d/d/d/d", "d/d/d/d/d"]
    assert listing["truncated"] is False


# --- read_file through the editor (ACP) ------------------------------------------------


class _Editor:
    """An ACP client that answers every read with a line of its own, and keeps the
    paths it was asked for: a file the store refuses must never be asked for (an
    editor asked for a sparse terabyte tries to read it)."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass

    async def read_text_file(
        self, session_id: str, path: str, **kwargs: Any
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content="the editor's line\n")


async def test_a_huge_sparse_file_is_not_asked_of_the_editor(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(ws / "big.log", "wb") as f:
        f.write(b"start\n")
        f.truncate(1 << 40)
    (ws / "small.txt").write_text("on disk\n")
    left, right = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=left)
    client_reader, client_writer = await asyncio.open_connection(sock=right)
    editor = _Editor()
    agent_conn = AgentSideConnection(CodemodeAcpAgent(AcpOptions()), agent_writer, agent_reader)
    ClientSideConnection(editor, client_writer, client_reader)

    async def flush() -> None:
        pass

    approver = AcpApprover(agent_conn, "s1", open_call_for=lambda tool: None, flush=flush)
    fs = FileSystemCapabilities(read_text_file=True, write_text_file=False)
    ctx = ToolContext(workspace=ws, client=AcpToolClient(agent_conn, "s1", fs, approver))
    try:
        with pytest.raises(ToolError) as refused:
            await builtin_registry().invoke("read_file", {"path": "big.log"}, ctx)
        assert "over the" in str(refused.value) and editor.reads == []
        read = await builtin_registry().invoke("read_file", {"path": "small.txt"}, ctx)
        assert read["content"] == "the editor's line\n"  # (the editor is still asked)
        assert editor.reads == [str(ws / "small.txt")]
    finally:
        for writer in (agent_writer, client_writer):
            writer.close()
