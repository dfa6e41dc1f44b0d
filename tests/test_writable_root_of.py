"""``host_programs.writable_root_of`` (asked before every program codemode starts) finds
a path's root by looking up its folders, not by scanning every root: checked here
against the plain definition (a root is the path itself or one of its folders; the
outermost wins) over many roots and paths, and its answers kept while the record of
earlier sessions' roots is unchanged."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from codemode.locations import host_programs, written_roots


def _plain(path: str, roots: list[str]) -> str | None:
    for r in sorted(roots):
        if path == r or path.startswith(r.rstrip("/") + "/"):
            return r
    return None


def test_it_agrees_with_the_plain_definition() -> None:
    rng = random.Random(7)
    names = ["a", "ab", "b", "a.b", "c"]
    roots = {"/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))
             for _ in range(300)}  # fmt: skip
    roots |= {"/a", "/a/b", "/ab"}  # nested roots, and one that is a mere string prefix
    ordered = tuple(sorted(roots))
    for _ in range(3000):
        path = "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 6)))
        assert host_programs.writable_root_of(path, ordered) == _plain(path, list(ordered)), path
    assert host_programs.writable_root_of("/a/b/c", ("/a/b", "/a")) == "/a"  # the outermost
    assert host_programs.writable_root_of("/abc", ("/ab", "/a")) is None
    assert host_programs.writable_root_of("/etc/passwd", ("/",)) == "/"


def test_the_roots_are_made_once_while_nothing_changes(tmp_path: Path) -> None:
    first = host_programs.writable_roots()
    assert host_programs.writable_roots() is first
    token = host_programs.register_roots([])
    try:
        assert host_programs.writable_roots() == first  # a session with no roots
    finally:
        host_programs.unregister_roots(token)
    # A new root is seen at once (and stays: it is recorded for later sessions).
    token = host_programs.register_roots([tmp_path])
    host_programs.unregister_roots(token)
    assert str(tmp_path.resolve()) in host_programs.writable_roots()
    assert host_programs.writable_root_of(str(tmp_path / "bin" / "git")) == str(tmp_path.resolve())


def test_the_record_is_read_again_as_it_grows_checking_only_new_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each session appends its roots to the record; a process that read it checks only
    the lines appended since, and still sees every change: an appended root, a last line
    without its newline (and the rest of it once appended), and an edit before the end
    (a whole read again)."""
    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    folders = [tmp_path / name for name in ("a", "b", "abc", "d")]
    for folder in folders:
        folder.mkdir()
    a, b, abc, d = (str(f) for f in folders)
    record = written_roots.record_path()
    record.write_text(f"{a}\n")
    assert written_roots.recorded() == (a,)

    checked: list[str] = []
    real_lexists = os.path.lexists
    monkeypatch.setattr(os.path, "lexists", lambda p: (checked.append(p), real_lexists(p))[1])
    with record.open("a") as f:
        f.write(f"{b}\n")
    assert written_roots.recorded() == (a, b)
    assert checked == [b], "only the new line is checked"
    with record.open("a") as f:
        f.write(abc[:-1])  # a line being appended: not whole yet
    assert written_roots.recorded() == (a, b)  # (its beginning names no folder)
    with record.open("a") as f:
        f.write(abc[-1] + "\n")
    assert written_roots.recorded() == tuple(sorted((a, b, abc)))
    with record.open("a") as f:
        f.write(d)  # written by hand, no newline: read all the same
    assert d in written_roots.recorded()
    record.write_text(f"{b}\n{d}\n")  # an edit: read whole again
    assert written_roots.recorded() == (b, d)
