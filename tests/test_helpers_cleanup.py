"""A build of the compiled sandbox helpers removes the helpers and records that older
formats left in the same cache folder (an upgrade left them there for good), once they
are a day old; newer formats, recent files, other people's files, links and anything
not named like a helper stay. Real compiles into a private ``$CODEMODE_CACHE``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from codemode.locations.host_programs import host_program
from codemode.sandbox.helpers import compiled

HASH = "0123456789abcdef"
OLD = time.time() - 3 * 24 * 3600  # older than the grace period


def _file(folder: Path, name: str, *, when: float = OLD) -> Path:
    p = folder / name
    p.write_bytes(b"\x7fELF old helper")
    os.utime(p, (when, when))
    return p


def test_a_build_removes_older_formats_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if host_program("cc") is None and host_program("gcc") is None:
        pytest.skip("no C compiler here: helpers are never built, so never cleaned")
    cache = tmp_path / "cache"
    folder = cache / "helpers"
    folder.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("CODEMODE_CACHE", str(cache))
    gone = [
        _file(folder, f"dropcaps-{HASH}"),  # format 1: no version in the name
        _file(folder, f"dropcaps-v2-{HASH}"),
        _file(folder, f"subreaper-v2-{HASH}"),
        _file(folder, f"dropcaps-v{compiled.FORMAT - 1}-{HASH}.sha256"),
    ]
    kept = [
        _file(folder, f"subreaper-v2-{HASH[::-1]}", when=time.time()),  # rebuilt lately
        _file(folder, f"dropcaps-v{compiled.FORMAT + 1}-{HASH}"),  # a newer codemode's
        _file(folder, f"dropcaps-v{compiled.FORMAT}-{HASH}"),  # this format's
        _file(folder, "notes.txt"),
        _file(folder, "dropcaps-v2-short"),
    ]
    link = folder / f"old-v1-{HASH}"
    link.symlink_to(gone[0].name)
    kept.append(link)
    if os.geteuid() == 0:
        theirs = _file(folder, f"other-v1-{HASH}")
        os.chown(theirs, 65534, 65534)
        kept.append(theirs)
    else:
        print("not root: the check of a file of another user is not made")

    helper = compiled.path("dropcaps.c")

    assert helper is not None and Path(helper).parent == folder
    assert Path(helper).name.startswith(f"dropcaps-v{compiled.FORMAT}-")
    for p in gone:
        assert not p.exists(), p.name
    for p in kept:
        assert os.path.lexists(p), p.name
    assert compiled.record_path(Path(helper)).exists()  # its own record stays

    # A helper that is there costs no look at the folder: nothing is removed then.
    late = _file(folder, f"subreaper-{HASH}")
    assert compiled.path("dropcaps.c") == helper
    assert late.exists()
