"""Red team: ``grep``, ``glob`` and ``/undo``'s snapshot scan walk, in codemode's own
process, a tree a confined program can write. A folder it floods with entries, folders
each crowded short of any one limit but nested so their entries wait together, and a
chain deeper than the kernel's longest path must cost a bounded amount of memory, and
the result must say which part of the tree went unsearched: a cut search must not look
complete (docs/threat-model.md, "Host-side reads and walks").

Memory is the peak resident size (``VmHWM``) a child process gains while it runs one
search, after a first search has loaded what a search loads. The trees are made on a
memory filesystem where there is one (a busy disk makes entries too slowly for a test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Before the fix: one sorted listing of the flooded folder (DirEntry objects) plus a
# relative path for each of its files on the walk's stack took ~80-100 MB for these
# trees, and the nested and deep trees more. After it, a walk holds at most its cap of
# names (~25 MB of them at the longest names used here).
GROWTH_LIMIT_KB = 50 * 1024

CHILD = """
import asyncio, json, sys
from pathlib import Path

def peak_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

async def main():
    ws, tool, args = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    if tool == "snapshots":
        from codemode.tui.snapshots import Snapshots
        for store in ("warm", "store"):
            (Path(sys.argv[4]) / store).mkdir(exist_ok=True)
        warm = Snapshots(ws / "warm", store=Path(sys.argv[4]) / "warm")
        warm.prepare()
        before = peak_kb()
        snaps = Snapshots(ws, store=Path(sys.argv[4]) / "store")
        snaps.prepare()
        result = {"disabled": snaps.disabled, "files": len(snaps._last)}
    else:
        from codemode.tools.builtin import builtin_registry
        from codemode.tools.context import ToolContext
        reg, ctx = builtin_registry(), ToolContext(workspace=ws)
        await reg.invoke(tool, {**args, "path": "warm"}, ctx)  # loads RE2 and the like
        before = peak_kb()
        result = await reg.invoke(tool, args, ctx)
    print(json.dumps({"grown_kb": peak_kb() - before, "result": result}))

asyncio.run(main())
"""


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        w = Path(tempfile.mkdtemp(prefix="codemode-test-walk-", dir="/dev/shm"))
    else:
        w = tmp_path / "ws"
        w.mkdir()
    (w / "warm").mkdir()
    (w / "warm" / "w.py").write_text("needle\n")
    yield w
    # rm, not shutil.rmtree: the deep chain is past Python's recursion limit.
    subprocess.run(["rm", "-rf", "--", str(w)], check=True)


def _flood(folder: Path, count: int, *, width: int = 100, suffix: str = "") -> None:
    """``folder`` (made if missing) holding ``count`` empty files with names ``width``
    characters long: hard links to a few files, which a command makes fast."""
    folder.mkdir(exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(count):
            if i % 50_000 == 0:  # ext4 takes at most 65,000 links to one file
                base = f"base{i}{suffix}"
                os.close(os.open(base, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            name = f"{i:0{width}d}{suffix}"
            os.link(base, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def _run(ws: Path, tool: str, tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    """The peak memory (KiB) one ``tool`` call gained in a child process, and its result."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ws), tool, json.dumps(args), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    return out["grown_kb"], out["result"]


def _says_cut(result: dict[str, Any], folder: str) -> None:
    assert result["truncated"] is True, result.get("note")
    assert result.get("note") and folder in result["note"], result.get("note")


# --- one folder flooded with entries ------------------------------------------------------


@pytest.fixture
def flooded(ws: Path) -> Path:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("needle\n")
    _flood(ws / "flood", 200_000)
    return ws


def test_grep_over_a_flooded_folder_holds_bounded_memory_and_says_so(
    flooded: Path, tmp_path: Path
) -> None:
    # was: grown ~85 MB, and a result with no word of the folder it had listed whole
    grown, result = _run(flooded, "grep", tmp_path, pattern="needle", glob="*.py")
    assert grown < GROWTH_LIMIT_KB, grown
    assert [m["path"] for m in result["matches"]] == ["src/a.py", "warm/w.py"]
    _says_cut(result, "flood")


def test_glob_over_a_flooded_folder_holds_bounded_memory_and_says_so(
    flooded: Path, tmp_path: Path
) -> None:
    grown, result = _run(flooded, "glob", tmp_path, pattern="**/*.py")
    assert grown < GROWTH_LIMIT_KB, grown
    assert result["matches"] == ["src/a.py", "warm/w.py"]
    _says_cut(result, "flood")


def test_a_snapshot_scan_of_a_flooded_folder_holds_bounded_memory_and_turns_off(
    ws: Path, tmp_path: Path
) -> None:
    """The entries are ignored files, so the scan never reaches its cap of files: before,
    it listed and sorted all of them, and took the snapshot for a whole one."""
    (ws / ".gitignore").write_text("*.tmp\n")
    (ws / "kept.txt").write_text("x\n")
    _flood(ws / "flood", 200_000, width=200, suffix=".tmp")
    grown, result = _run(ws, "snapshots", tmp_path)
    assert grown < GROWTH_LIMIT_KB, grown
    assert result["disabled"] and "flood" in result["disabled"], result


# --- folders each short of a limit, their entries waiting together ------------------------


@pytest.fixture
def nested(ws: Path) -> Path:
    """Eight folders, each inside the last and each holding 40,000 files and the next
    folder, named "0" so it is walked first while its parent's files wait."""
    folder = ws
    for _ in range(8):
        folder = folder / "0"
        folder.mkdir()
        _flood(folder, 40_000, width=200)
    (folder / "deep.py").write_text("needle\n")
    return ws


def test_grep_over_nested_crowded_folders_holds_bounded_memory_and_says_so(
    nested: Path, tmp_path: Path
) -> None:
    # was: every level's files waited on the stack as relative paths, ~100 MB in all
    grown, result = _run(nested, "grep", tmp_path, pattern="needle", glob="*.py")
    assert grown < GROWTH_LIMIT_KB, grown
    _says_cut(result, "0/0")


def test_glob_over_nested_crowded_folders_holds_bounded_memory_and_says_so(
    nested: Path, tmp_path: Path
) -> None:
    grown, result = _run(nested, "glob", tmp_path, pattern="**/*.py")
    assert grown < GROWTH_LIMIT_KB, grown
    _says_cut(result, "0/0")


# --- a chain of folders deeper than the kernel's longest path -----------------------------


def _deep_chain(ws: Path, files: int) -> str:
    """Folders named "0", each inside the last, until a path is past 4,096 bytes, with
    ``files`` files in each (waiting while the "0" below is walked) and ``needle.py``
    in the deepest; returns the deepest folder's path relative to ``ws``."""
    levels = (4200 - len(str(ws))) // 2
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            for i in range(files):
                os.close(os.open(f"f{i:02d}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            os.mkdir("0", dir_fd=fd)
            inner = os.open("0", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("needle.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return "/".join(["0"] * levels)


def test_grep_and_glob_say_a_folder_past_the_longest_path_was_not_searched(
    ws: Path, tmp_path: Path
) -> None:
    # was: the folders past 4,096 bytes were passed over without a word, so a search
    # for needle.py found nothing and looked whole
    _deep_chain(ws, files=0)
    _, found = _run(ws, "glob", tmp_path, pattern="**/needle.py")
    assert found["matches"] == []
    _says_cut(found, "0/0/0")
    assert "4096" in found["note"] or "4,096" in found["note"], found["note"]
    _, lines = _run(ws, "grep", tmp_path, pattern="needle", glob="*.py")
    _says_cut(lines, "0/0/0")


def test_a_deep_chain_with_files_at_every_level_holds_bounded_memory(
    ws: Path, tmp_path: Path
) -> None:
    # was: the files of every level above waited as relative paths as long as their
    # depth, the square of the depth in all (~100 MB here)
    _deep_chain(ws, files=25)
    grown, result = _run(ws, "glob", tmp_path, pattern="**/*.py")
    assert grown < GROWTH_LIMIT_KB, grown
    _says_cut(result, "0/0/0")
    grown, _ = _run(ws, "grep", tmp_path, pattern="needle", glob="*.py")
    assert grown < GROWTH_LIMIT_KB, grown


def test_a_snapshot_scan_turns_off_past_the_longest_path(ws: Path, tmp_path: Path) -> None:
    # was: snapshots stayed on and /undo could never put back what lay below
    _deep_chain(ws, files=0)
    _, result = _run(ws, "snapshots", tmp_path)
    assert result["disabled"] and "0/0/0" in result["disabled"], result


# --- stop: a cancelled search stops inside the listing of a flooded folder ----------------


def test_stop_ends_a_walk_inside_a_flooded_folder(ws: Path) -> None:
    """``stop`` is how a cancelled search (the program's time limit) ends its walk: it
    must be heard while a flooded folder is read, not only once it has been read whole
    (and sorted)."""
    from codemode.tools.ignore import walk_files

    _flood(ws / "flood", 200_000)

    def walk(stop_after: int | None) -> float:
        polls = 0

        def stop() -> bool:
            nonlocal polls
            polls += 1
            return stop_after is not None and polls > stop_after

        started = time.process_time()
        for _ in walk_files(ws / "flood", stop=stop):
            pass
        return time.process_time() - started

    whole = min(walk(None) for _ in range(2))
    stopped = min(walk(100) for _ in range(2))
    assert stopped < whole / 5, (stopped, whole)


# --- the bounds themselves: a real project is walked whole, the rest says it was cut -------


def test_a_big_project_is_searched_whole(ws: Path) -> None:
    """The bounds are for trees made to flood the walk: 120,000 files in 600 folders (a
    big monorepo's worth) are all found, in order, with no note."""
    from codemode.tools.ignore import walk_files

    (ws / "src").mkdir()
    for i in range(600):
        _flood(ws / "src" / f"m{i:03d}", 200, width=8)
    walk = walk_files(ws / "src")
    found = list(walk)
    assert len(found) == 600 * (200 + 1) and found == sorted(found), len(found)
    assert walk.cuts.first is None and walk.cuts.note("src") is None


def test_the_walk_stops_reading_at_its_limit_in_all_and_says_so(ws: Path) -> None:
    """Folders each short of the per-folder limit, side by side: past the limit of
    entries read in all, the rest is not read, and the note counts what was left."""
    from codemode.tools.ignore import walk_files
    from codemode.tools.walk_bounds import WalkLimits

    for i in range(20):
        _flood(ws / f"d{i:02d}", 100, width=8)
    walk = walk_files(ws, limits=WalkLimits(folder=500, held=5000, total=1000))
    found = list(walk)
    assert len(found) < 1000 and found == sorted(found), len(found)
    note = walk.cuts.note(".")
    assert note and "1,000 directory entries in all" in note and "more folders" in note, note
    assert walk.cuts.count >= 10, walk.cuts.count


def test_a_cut_note_shows_a_hostile_name_escaped(ws: Path) -> None:
    """The note names a folder a command named: a terminal escape or a byte that is not
    UTF-8 in it is shown as an escape, never raw (the note reaches the terminal too)."""
    from codemode.tools.ignore import walk_files
    from codemode.tools.walk_bounds import WalkLimits

    name = os.fsdecode(b"fl\x1b[2Jood\xff")
    _flood(ws / name, 30, width=4)
    walk = walk_files(ws, limits=WalkLimits(folder=10))
    list(walk)
    note = walk.cuts.note(".")
    assert note and "\x1b" not in note and "fl\\x1b[2Jood\\udcff" in note, note
    note.encode("utf-8")  # no lone surrogate left in it


def test_a_cut_search_reads_as_cut_in_the_classic_dialect(flooded: Path) -> None:
    """A model that reads text, not the structured result, is told too."""
    import asyncio

    from codemode.tools.glob import GLOB
    from codemode.tools.grep import GREP
    from tests.file_tools_support import call

    lines = asyncio.run(call(flooded, "grep", pattern="needle", glob="*.py"))
    assert "flood was not searched whole" in (GREP.text(lines) or ""), GREP.text(lines)
    names = asyncio.run(call(flooded, "glob", pattern="**/*.py"))
    text = GLOB.text(names) or ""
    assert text.startswith("src/a.py\nwarm/w.py\n[") and "flood" in text, text
