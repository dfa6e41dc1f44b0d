"""``host_programs.writable_root_of`` (asked before every program codemode starts) finds
a path's root by looking up its folders, not by scanning every root: checked here
against the plain definition (a root is the path itself or one of its folders; the
outermost wins) over many roots and paths, and its answers kept while the record of
earlier sessions' roots is unchanged."""

from __future__ import annotations

import random
from pathlib import Path

from codemode.locations import host_programs


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
