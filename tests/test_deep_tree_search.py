"""glob and grep over a hostile repository thousands of folders deep cost time about
linear in its depth: each folder and file costs the same however deep it is (they cost
the square of the depth, ~8 CPU-s for one glob at 1,500 levels, ~15 for a grep with a
file in every folder, when every folder's ``.gitignore`` and every file were reached by
a walk down from ``/`` in Python)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext
from codemode_testkit.deep_tree import deep_tree


def remove_tree(top: Path) -> None:
    # pytest's own clean-up of old temporary folders recurses, and would fail on it
    subprocess.run(["rm", "-rf", "--one-file-system", str(top)], check=True)


def search_cpu(ws: Path) -> tuple[float, int, int]:
    """CPU seconds of one glob and one grep over ``ws``, and how many each found."""
    registry = builtin_registry()
    ctx = ToolContext(workspace=ws)

    async def both() -> tuple[Any, Any]:
        found = await registry.invoke("glob", {"pattern": "**/*.txt"}, ctx)
        lines = await registry.invoke("grep", {"pattern": "needle", "max_results": 5000}, ctx)
        return found, lines

    started = time.process_time()  # every thread of the process: the tools run in one
    found, lines = asyncio.run(both())
    return time.process_time() - started, len(found["matches"]), len(lines["matches"])


def test_a_search_costs_time_linear_in_the_depth_of_the_tree(tmp_path: Path) -> None:
    depth = 250
    small, large = tmp_path / "small", tmp_path / "large"
    try:
        deep_tree(small, depth)
        deep_tree(large, 2 * depth)
        # Interleaved and the best of three, so that load from elsewhere falls on both.
        small_cpu, large_cpu = [], []
        for _ in range(3):
            cpu, globbed, grepped = search_cpu(small)
            assert globbed == grepped == depth
            small_cpu.append(cpu)
            cpu, globbed, grepped = search_cpu(large)
            assert globbed == grepped == 2 * depth
            large_cpu.append(cpu)
    finally:
        remove_tree(small)
        remove_tree(large)
    ratio = min(large_cpu) / min(small_cpu)
    print(f"depth {depth}: {min(small_cpu):.3f} CPU-s, {2 * depth}: {min(large_cpu):.3f} CPU-s")
    # Twice the depth: twice the cost when linear, four times when quadratic (3.99 before).
    assert ratio < 3, (ratio, small_cpu, large_cpu)


def test_links_to_files_are_found_and_links_to_folders_not_followed(tmp_path: Path) -> None:
    # The walk lists each folder through a descriptor; whether an entry is a file is
    # asked through it too, so it must still be open then (a link to a file was lost).
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "o.txt").write_text("needle\n")
    (ws / "sub" / "real.txt").write_text("needle\n")
    (ws / "sub" / "link.txt").symlink_to("real.txt")
    (ws / "out").symlink_to(outside)  # a link to a folder is not walked into
    registry = builtin_registry()
    ctx = ToolContext(workspace=ws)
    found = asyncio.run(registry.invoke("glob", {"pattern": "**/*.txt"}, ctx))
    assert found["matches"] == ["sub/link.txt", "sub/real.txt"]
    lines = asyncio.run(registry.invoke("grep", {"pattern": "needle"}, ctx))
    assert [m["path"] for m in lines["matches"]] == ["sub/link.txt", "sub/real.txt"]


def test_a_walk_back_up_a_deep_tree_finds_every_branch(tmp_path: Path) -> None:
    # The walk holds a descriptor for only some of the folders above it: going back up
    # to a folder it let go (to walk its next branch) opens it again from a held one.
    ws = tmp_path / "ws"
    spine = ws.joinpath(*["d"] * 41)
    expected = []
    for branch in ("a", "b", "c"):
        bottom = spine.joinpath(branch, *["e"] * 40)
        bottom.mkdir(parents=True)
        for level in range(0, 41, 7):
            folder = spine.joinpath(branch, *["e"] * level)
            (folder / "f.txt").write_text("needle\n")
            expected.append(folder / "f.txt")
    (spine / "z.txt").write_text("needle\n")
    expected.append(spine / "z.txt")
    shown = sorted(p.relative_to(ws).as_posix() for p in expected)
    before = len(os.listdir("/proc/self/fd"))
    registry = builtin_registry()
    ctx = ToolContext(workspace=ws)
    found = asyncio.run(registry.invoke("glob", {"pattern": "**/*.txt"}, ctx))
    assert found["matches"] == shown
    lines = asyncio.run(registry.invoke("grep", {"pattern": "needle", "max_results": 5000}, ctx))
    assert sorted(m["path"] for m in lines["matches"]) == shown
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # nothing left open



def test_grep_reads_no_process_file_through_a_link(tmp_path: Path) -> None:
    # grep opens each file with the kernel resolving the path (not a walk in Python);
    # the refusals apply to where that lands. /proc/self/status is text (environ, the
    # secret one, is refused the same way but would also be passed over as binary).
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "plain.txt").write_text("Umask:\t0022\n")
    (ws / "status").symlink_to("/proc/self/status")
    (ws / "sub" / "root-status").symlink_to("/proc/self/root/proc/self/status")
    (ws / "sub" / "thread-status").symlink_to("/proc/thread-self/status")
    (ws / "sub" / "hop").symlink_to("../status")
    registry = builtin_registry()
    ctx = ToolContext(workspace=ws)
    found = asyncio.run(registry.invoke("grep", {"pattern": "^Umask:"}, ctx))
    assert [m["path"] for m in found["matches"]] == ["plain.txt"], found
    for path in ("status", "sub/hop", "sub/thread-status"):
        named = asyncio.run(registry.invoke("grep", {"pattern": "^Umask:", "path": path}, ctx))
        assert named["matches"] == [], named
