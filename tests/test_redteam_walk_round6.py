"""Red team, round 6: what a tree a confined program wrote can still cost one ``grep``,
``glob`` or ``/undo`` scan in codemode's own process once the walk's entries are bounded
(tests/test_redteam_walk_bounds.py): the ``.gitignore`` files it compiles and matches,
the bytes grep reads, the names it lists, the bytes the scan hashes
(docs/threat-model.md, "Host-side reads and walks"; docs/file-tools.md, "Searches").

CPU is the child's user and system time over the one call, memory the peak resident size
(``VmHWM``) it gained, after a first call in another workspace loaded what a call loads.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHILD = """
import asyncio, json, resource, sys
from pathlib import Path

def peak_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

def cpu():
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime

async def main():
    ws, warm, tool = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    args = json.loads(sys.argv[4])
    from codemode.tools.builtin import builtin_registry
    from codemode.tools.context import ToolContext
    reg = builtin_registry()
    await reg.invoke(tool, {**args, "path": "."}, ToolContext(workspace=warm))
    before, started = peak_kb(), cpu()
    result = await reg.invoke(tool, args, ToolContext(workspace=ws))
    spent = cpu() - started
    print(json.dumps({"grown_kb": peak_kb() - before, "cpu": spent, "result": result}))

asyncio.run(main())
"""


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    w = Path(tempfile.mkdtemp(prefix="codemode-test-walk6-", dir=base))
    (w / "ws").mkdir()
    (w / "warm").mkdir()
    (w / "warm" / "w.py").write_text("needle\n")
    yield w / "ws"
    subprocess.run(["rm", "-rf", "--", str(w)], check=True)


def _run(ws: Path, tool: str, **args: Any) -> tuple[int, float, dict[str, Any]]:
    """The peak memory (KiB) and CPU seconds one ``tool`` call cost a child, and its result."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ws), str(ws.parent / "warm"), tool, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    return out["grown_kb"], out["cpu"], out["result"]


def _links(folder: Path, data: bytes, count: int) -> None:
    """``count`` hard links in ``folder`` to one file holding ``data`` (made fast)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base").write_bytes(data)
    for i in range(count):
        os.link(folder / "base", folder / f"f{i:05d}.txt")


# --- .gitignore files: compiling them --------------------------------------------------


def test_distinct_big_gitignores_in_many_folders_cost_a_bounded_compile(ws: Path) -> None:
    """Each folder's .gitignore is compiled (and a compiled one kept for later searches):
    12 folders of 20,000 distinct lines each took ~11 s and ~500 MB (40 took 36 s and 1.5
    GB). Now one walk compiles at most 16,384 lines, and says which it did not honour."""
    for d in range(12):
        folder = ws / f"d{d:02d}"
        folder.mkdir()
        (folder / ".gitignore").write_text("".join(f"z{d}_{i}\n" for i in range(20_000)))
        (folder / "a.py").write_text("needle\n")
    grown, cpu, result = _run(ws, "glob", pattern="**/*.py")
    assert grown < 50 * 1024 and cpu < 3, (grown, cpu)
    assert len(result["matches"]) == 12
    assert result["truncated"] and "the .gitignore in d00 was not honoured" in result["note"]
    assert "nor 11 more" in result["note"], result["note"]


def test_a_gitignore_over_the_walks_budget_is_not_honoured_and_says_so(ws: Path) -> None:
    """Folders each short of the per-file bound: the ones past the walk's budget are not
    honoured (the search looks at more files, never fewer), and the note says so; one
    whose content was seen before in the walk costs nothing."""
    from codemode.tools.ignore import walk_files
    from codemode.tools.walk_bounds import WalkLimits

    for d in range(4):
        (ws / f"d{d}").mkdir()
        (ws / f"d{d}" / ".gitignore").write_text(f"*.log\nx{d}\n")
        (ws / f"d{d}" / "a.log").write_text("")
    for d in range(4, 8):  # the same content as d0's: compiled once
        (ws / f"d{d}").mkdir()
        (ws / f"d{d}" / ".gitignore").write_text("*.log\nx0\n")
        (ws / f"d{d}" / "a.log").write_text("")
    walk = walk_files(ws, limits=WalkLimits(ignore_lines=6))
    found = list(walk)
    # d0..d2 honoured (6 lines), d3 refused, d4..d7 the same file as d0.
    assert [f for f in found if f.endswith(".log")] == ["d3/a.log"], found
    note = walk.cuts.rules_note(".")
    assert note and note.startswith("the .gitignore in d3 was not honoured"), note
    assert walk.cuts.note(".") is None  # nothing left unsearched


# --- .gitignore files and globs: matching against them ------------------------------------


def _costly_tree(ws: Path, patterns: int, levels: int, per_level: int) -> None:
    """A .gitignore of ``patterns`` such as ``*a??????????????c7`` (a DFA of 2^15 states:
    RE2 falls back to its slow engine) over a chain of folders with names of 250 a's and
    b's, ``per_level`` files in each: ~34 ms a path at the bottom, per 64 patterns."""
    rng = random.Random(6)
    (ws / ".gitignore").write_text("".join(f"*a{'?' * 14}c{i}\n" for i in range(patterns)))
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            for _ in range(per_level):
                name = "".join(rng.choice("ab") for _ in range(250))
                os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            inner = "".join(rng.choice("ab") for _ in range(250))
            os.mkdir(inner, dir_fd=fd)
            fd, outer = os.open(inner, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(outer)
    finally:
        os.close(fd)


def test_matching_against_costly_gitignore_patterns_ends_the_walk_and_says_so(
    ws: Path,
) -> None:
    """Before: this walk matched every path to the end (a glob over it ran past 120 s);
    a walk now spends at most its limit of CPU matching, plus one file's patterns."""
    from codemode.tools.ignore import walk_files
    from codemode.tools.walk_bounds import WalkLimits

    _costly_tree(ws, patterns=1500, levels=14, per_level=20)
    started = time.thread_time()
    walk = walk_files(ws, limits=WalkLimits(match_seconds=0.5))
    list(walk)
    spent = time.thread_time() - started
    # 1,500 patterns: ~24 groups of ~34 ms each for one path past the limit.
    assert spent < 0.5 + 3, spent
    note = walk.cuts.note(".")
    assert note and "0.5 s of CPU" in note and "walk ended there" in note, note


def test_a_costly_glob_counts_with_the_walks_matching(ws: Path) -> None:
    """A glob such as ``**/*a??????????????c`` costs ~0.1 ms a name of 250 a's and b's:
    over a million names, minutes. ``FileWalk.matches`` counts its time with the walk's."""
    from codemode.tools.glob_pattern import compile_glob
    from codemode.tools.ignore import walk_files
    from codemode.tools.walk_bounds import WalkLimits

    rng = random.Random(7)
    (ws / "base").write_text("")
    for _ in range(8000):
        os.link(ws / "base", ws / "".join(rng.choice("ab") for _ in range(250)))
    regex = compile_glob("**/*a??????????????c")
    walk = walk_files(ws, limits=WalkLimits(match_seconds=0.05))
    started = time.thread_time()
    seen = sum(1 for rel in walk if not walk.matches(regex, rel) or True)
    spent = time.thread_time() - started
    assert seen < 8001 and spent < 2, (seen, spent)
    note = walk.cuts.note(".")
    assert note and "the search's" in note and "0.05 s" in note, note


# --- grep: what it reads and lists ------------------------------------------------------


def test_grep_over_many_files_near_the_read_cap_reads_a_bounded_amount(ws: Path) -> None:
    """120 links to a file of 20 MB (UTF-8, one character past U+FFFF): before, grep read
    all of them (~60 ms each: a million such files is hours) and held ~140 MB decoding
    one; now it reads at most 1 GB in all, says where it stopped, and checks UTF-8
    without a string of the whole file."""
    data = ("\U0001f600" + "a" * (20 * 1024 * 1024 - 16)).encode()
    _links(ws / "d", data, 120)
    grown, _, result = _run(ws, "grep", pattern="zzz")
    assert grown < 100 * 1024, grown
    assert result["files_searched"] <= 52, result["files_searched"]
    assert result["truncated"] and "not all files were searched" in result["note"]
    assert "1,024 MB" in result["note"], result["note"]


def test_grep_lists_at_most_100_latin1_files_and_counts_the_rest(ws: Path) -> None:
    # was: every one listed, each name up to 4,096 bytes: 49,000 such files in one folder
    # cost 183 MB, a million of them (20 folders) gigabytes
    _links(ws / ("x" * 200) / ("y" * 200), b"caf\xe9\n", 1000)
    _, _, result = _run(ws, "grep", pattern="zzz")
    assert len(result["latin1_files"]) == 100, len(result["latin1_files"])
    assert "latin1_files lists 100 of the 1,001 files read as Latin-1" in result["note"]


def test_grep_and_glob_pass_over_fifos_sockets_and_links_to_proc_and_dev(ws: Path) -> None:
    """A FIFO or socket named like a source file, a link loop, links to /dev/zero,
    /proc and a process's stdin: nothing blocks, nothing is read but the file."""
    src = ws / "src"
    src.mkdir()
    (src / "a.py").write_text("needle\n")
    os.mkfifo(src / "fifo.py")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "sock.py"))
    for name, target in [
        ("loop", "."),
        ("proc", "/proc"),
        ("dev", "/dev"),
        ("src/zero.py", "/dev/zero"),
        ("src/stdin.py", "/proc/self/fd/0"),
        ("src/l1.py", "l2.py"),
        ("src/l2.py", "l1.py"),
    ]:
        os.symlink(target, ws / name)
    try:
        _, cpu, lines = _run(ws, "grep", pattern="needle")
        _, _, names = _run(ws, "glob", pattern="**/*.py")
    finally:
        sock.close()
    assert [m["path"] for m in lines["matches"]] == ["src/a.py"] and cpu < 2, cpu
    assert names["matches"] == ["src/a.py"], names


# --- /undo's scan: what it hashes ------------------------------------------------------


def test_a_snapshot_scan_hashes_a_bounded_amount_and_says_which_it_cannot_undo(
    tmp_path: Path,
) -> None:
    """A command makes 50,000 links to one file of 4 MB in a second; the scan read and
    hashed each (200 GB, ~8 minutes, at every turn that touched the file). Past its
    budget a file is not hashed: a turn that changes it says it cannot be undone."""
    from codemode.tui.snapshots import Snapshots

    ws = tmp_path / "ws"
    _links(ws, b"x" * 1024, 10)
    (tmp_path / "store").mkdir()
    snaps = Snapshots(ws, store=tmp_path / "store", max_hashed_bytes=4 * 1024)
    snaps.begin_turn()
    for i in range(10):
        os.unlink(ws / f"f{i:05d}.txt")
        (ws / f"f{i:05d}.txt").write_bytes(b"changed")
    changes = snaps.end_turn()
    assert changes is not None
    # base and the first three links fit in 4 KB; the rest were never read.
    assert changes.unrestorable == [f"f{i:05d}.txt" for i in range(3, 10)], changes
    assert sorted(changes.before) == [f"f{i:05d}.txt" for i in range(3)], changes
