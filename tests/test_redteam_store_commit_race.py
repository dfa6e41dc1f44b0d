"""Attacks on the window between a multi-file write's journal and its commit
(``codemode/tools/store/commit.py``, ``journal_walk.py``): a command running beside
apply_patch swaps a folder on a path's way for a link (inside the workspace) after the
journal recorded that folder and before the commit walks it. The commit must not write
or remove through it (a recovery after a kill would refuse that path and leave a mix of
before and after): it fails, and its own rollback leaves the whole before.

And writers that follow no link (a batch apply, /undo): their journal walks as they
write, so a link on a path's way that they do not replace is neither walked through by
the recovery (removing a file at the link's target) nor reported as a change.

The planner and the commit are the real ones, run as apply_patch runs them; the swap is
made at the one point between them (``journal.begin`` returning), on real files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.tools.context import ToolContext
from codemode.tools.store import journal


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("CODEMODE_HOME", str(folder))
    return folder


def _plan(ws: Path, patch: str) -> Any:
    from codemode.tools.patch.parser import parse_patch
    from codemode.tools.patch.plan import make_plan
    from codemode.tools.store.disk import DiskStore

    ctx = ToolContext(workspace=ws)
    store = DiskStore(ctx)
    return store, make_plan(parse_patch(patch)[0], ws, ctx, store)


def _after_journal(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """``swap`` runs once the journal is written, before the commit's first step."""
    real = journal.begin

    def begin(*args: Any, **kwargs: Any) -> journal.Recording:
        recording = real(*args, **kwargs)
        swap()
        return recording

    monkeypatch.setattr(journal, "begin", begin)


def _to_link(folder: Path, target: str) -> None:
    folder.rename(folder.with_name(folder.name + "-old"))
    folder.symlink_to(target)


def _leftovers(ws: Path, home: Path) -> list[str]:
    tmp = [os.path.join(d, n) for d, _, names in os.walk(ws) for n in names if ".tmp" in n]
    folder = home / "journal"
    return tmp + (sorted(os.listdir(folder)) if folder.is_dir() else [])


def _patch(*ops: str) -> str:
    return "*** Begin Patch\n" + "".join(ops) + "*** End Patch\n"


# --- 1. a folder on the way swapped for a link between the journal and the commit ---------


def test_an_update_is_not_written_through_a_link_swapped_in_after_the_journal(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.tools.store.commit import CommitFailed

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "lib").mkdir()
    (ws / "src" / "a.py").write_text("one\n")
    (ws / "lib" / "a.py").write_text("one\n")  # the same bytes: the content check passes
    (ws / "b.txt").write_text("bee\n")
    store, plan = _plan(
        ws,
        _patch("*** Update File: b.txt\n@@\n-bee\n+BEE\n",
               "*** Update File: src/a.py\n@@\n-one\n+two\n"),
    )  # fmt: skip
    _after_journal(monkeypatch, lambda: _to_link(ws / "src", "lib"))
    with pytest.raises(CommitFailed) as info:
        store.commit(plan.removals, plan.writes, plan.originals)
    # was: lib/a.py became "two\n" (the write went where the link leads)
    assert (ws / "lib" / "a.py").read_text() == "one\n"
    assert (ws / "src-old" / "a.py").read_text() == "one\n"
    assert (ws / "b.txt").read_text() == "bee\n"  # the whole before
    assert "src/a.py" in str(info.value) and not info.value.partial
    assert _leftovers(ws, home) == []


def test_a_new_file_is_not_written_through_a_made_folder_swapped_for_a_link(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.tools.store.commit import CommitFailed

    ws = tmp_path / "ws"
    (ws / "src" / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("one\n")
    store, plan = _plan(
        ws,
        _patch("*** Update File: a.txt\n@@\n-one\n+two\n",
               "*** Add File: src/new/n.py\n+n\n"),
    )  # fmt: skip
    # The folder the commit would make is there now, a link to a folder in src (the
    # chain of folders above the landing still starts at the recorded base).
    _after_journal(monkeypatch, lambda: (ws / "src" / "new").symlink_to("sub"))
    with pytest.raises(CommitFailed):
        store.commit(plan.removals, plan.writes, plan.originals)
    assert sorted(os.listdir(ws / "src" / "sub")) == []  # was: sub/n.py
    assert (ws / "a.txt").read_text() == "one\n"
    assert _leftovers(ws, home) == []


def test_a_removal_is_not_made_through_a_link_swapped_in_after_the_journal(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.tools.store.commit import CommitFailed

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "lib").mkdir()
    (ws / "src" / "a.py").write_text("one\n")
    (ws / "lib" / "a.py").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    store, plan = _plan(
        ws,
        _patch("*** Delete File: src/a.py\n", "*** Update File: b.txt\n@@\n-bee\n+BEE\n"),
    )
    _after_journal(monkeypatch, lambda: _to_link(ws / "src", "lib"))
    with pytest.raises(CommitFailed):
        store.commit(plan.removals, plan.writes, plan.originals)
    assert (ws / "lib" / "a.py").read_text() == "one\n"  # was: removed
    assert (ws / "b.txt").read_text() == "bee\n"
    assert _leftovers(ws, home) == []


def test_a_write_through_a_link_present_when_journaled_still_goes_through(
    tmp_path: Path, home: Path
) -> None:
    # The file tools follow links within the roots: one there before the journal is
    # not a swap, and the write lands where it leads.
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    (ws / "src").symlink_to("lib")
    store, plan = _plan(ws, _patch("*** Add File: src/new/n.py\n+n\n"))
    store.commit(plan.removals, plan.writes, plan.originals)
    assert (ws / "lib" / "new" / "n.py").read_text() == "n\n"
    assert _leftovers(ws, home) == []


# --- 2. writers that follow no link journal as they write ---------------------------------


@pytest.mark.parametrize("there", ["same bytes", "other bytes"])
def test_a_batch_write_under_a_link_it_does_not_replace_leaves_the_target_alone(
    tmp_path: Path, home: Path, there: str
) -> None:
    from codemode.batch.applying import apply
    from codemode.batch.changes import ApplyError, Change

    repo = tmp_path / "repo"
    (repo / "d").mkdir(parents=True)
    (repo / "l").symlink_to("d")
    held = b"new\n" if there == "same bytes" else b"the user's own\n"
    (repo / "d" / "new.txt").write_bytes(held)
    (repo / "a.txt").write_text("a\n")
    changes = [
        Change("a.txt", "file", data=b"A\n", base=_fingerprint(b"a\n")),
        Change("l/new.txt", "file", data=b"new\n"),  # the batch follows no link: refused
    ]
    with pytest.raises(ApplyError) as info:
        apply(repo, changes)
    # was: d/new.txt removed by the rollback (taken for the batch's write), or a notice
    # that it "changed since"
    assert (repo / "d" / "new.txt").read_bytes() == held
    assert "Not restored" not in str(info.value), str(info.value)
    assert (repo / "a.txt").read_text() == "a\n"
    assert os.readlink(repo / "l") == "d"
    assert _leftovers(repo, home) == []


def _fingerprint(data: bytes) -> str:
    from codemode.hostfs.fingerprint import of_bytes

    return of_bytes(data)


# --- 3. a folder swapped for a link after a write, before the failed commit's rollback ---


def test_a_rollback_acts_only_in_the_folder_its_write_was_made_in(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit writes ``src/new.py``, then fails on a later file; meanwhile a command
    made ``src`` a link to ``lib``, which holds a ``new.py`` of its own. Undoing the new
    file must not remove ``lib/new.py``: the undo is left undone and named."""
    from codemode.hostfs import beneath
    from codemode.tools.store import commit as commit_module
    from codemode.tools.store.commit import CommitFailed

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "lib").mkdir()
    (ws / "lib" / "new.py").write_text("the user's own\n")
    (ws / "z.txt").write_text("zed\n")
    store, plan = _plan(
        ws,
        _patch("*** Add File: src/new.py\n+n\n", "*** Update File: z.txt\n@@\n-zed\n+ZED\n"),
    )
    real_write = beneath.write_atomic
    calls: list[int] = []

    def write_atomic(spot: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the second file: the swap, then a failure
            _to_link(ws / "src", "lib")
            raise OSError(28, "No space left on device")
        return real_write(spot, *args, **kwargs)

    monkeypatch.setattr(commit_module, "write_atomic", write_atomic)
    with pytest.raises(CommitFailed) as info:
        store.commit(plan.removals, plan.writes, plan.originals)
    assert (ws / "lib" / "new.py").read_text() == "the user's own\n"  # was: removed
    assert info.value.partial and "src/new.py" in str(info.value), str(info.value)
    assert (ws / "z.txt").read_text() == "zed\n"
