"""A compiled helper swapped between two processes is compiled again, never run.

Within one process a helper is pinned by the digest held in memory
(``test_confinement_own``); these tests attack the gap between processes: the first
process compiles ``dropcaps`` and ``subreaper`` into the helpers cache, something with
the cache owner's rights replaces them (renamed over, rewritten in place, with or
without a record of its own), and the next process must not run what was planted. Each
runs as root and as an unprivileged user (uid 65534) where the machine allows.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.sandbox.helpers import compiled
from tests.confinement_support import (
    NOBODY,
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    run_shell,
    shared_dir,
    skip_unless,
)

__all__ = ["shared_dir"]  # the fixture, used by name

SOURCES = ("dropcaps.c", "subreaper.c")
# What a planted helper does: leave a mark where the test can see it, then run the
# command as the real one would (so nothing else fails and hides the mark).
PLANTED = '#!/bin/sh\necho planted >> "{mark}"\nexec "$@"\n'

LOOKUP = """
import json, sys
from codemode.sandbox.helpers import compiled
print(json.dumps({s: compiled.path(s) for s in sys.argv[1:]}))
"""


def _python(user: str, code: str, cache: Path, *args: str) -> dict[str, str | None]:
    """Run ``code`` in a new process as ``user`` with the helpers cache in ``cache``."""
    env = {**os.environ, "CODEMODE_CACHE": str(cache)}
    argv = [sys.executable]
    if user == "nobody":
        env["PYTHONPATH"] = f"{REPO}:{_site_packages()}"
        argv = [*_as_nobody(), SYSTEM_PYTHON]
    p = subprocess.run(
        [*argv, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300,
        cwd="/",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    result: dict[str, str | None] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def _as_user(user: str, argv: list[str]) -> None:
    """The attacker: a process with the cache owner's rights."""
    prefix = _as_nobody() if user == "nobody" else []
    subprocess.run([*prefix, *argv], check=True, timeout=60, cwd="/")


def _cache(base: Path, user: str) -> Path:
    cache = base / "cache"
    cache.mkdir(mode=0o700)
    give(cache, user)
    return cache


def _compiled_first(user: str, cache: Path) -> dict[str, Path]:
    found = _python(user, LOOKUP, cache, *SOURCES)
    if any(p is None for p in found.values()):
        pytest.skip(f"no C compiler works here, so there is no helper to swap: {found}")
    return {s: Path(p) for s, p in found.items() if p is not None}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _plant(user: str, exe: Path, how: str, mark: Path) -> bytes:
    """Replace ``exe`` as ``user`` would; returns the planted bytes."""
    planted = PLANTED.format(mark=mark).encode()
    record = compiled.record_path(exe)
    if how == "renamed over":
        script = 'printf %s "$1" > "$2.new" && chmod 755 "$2.new" && mv -f "$2.new" "$2"'
    elif how == "rewritten in place":
        script = 'chmod u+w "$2" && printf %s "$1" > "$2" && chmod 755 "$2"'
    elif how == "record removed too":
        script = (
            'printf %s "$1" > "$2.new" && chmod 755 "$2.new" && mv -f "$2.new" "$2" && '
            'rm -f "$3"'
        )
    elif how == "record for another program":
        # a record of the right form, for the right source, whose digest is the planted
        # program's, but writable by others: not a record codemode wrote
        fields = json.loads(record.read_bytes())
        fields["sha256"] = hashlib.sha256(planted).hexdigest()
        script = (
            'printf %s "$1" > "$2.new" && chmod 755 "$2.new" && mv -f "$2.new" "$2" && '
            f"rm -f \"$3\" && printf %s '{json.dumps(fields)}' > \"$3\" && chmod 666 \"$3\""
        )
    else:
        raise AssertionError(how)
    _as_user(user, ["sh", "-c", script, "plant", planted.decode(), str(exe), str(record)])
    assert exe.read_bytes() == planted
    return planted


@pytest.mark.parametrize("user", ["self", "nobody"])
@pytest.mark.parametrize(
    "how",
    ["renamed over", "rewritten in place", "record removed too", "record for another program"],
)
def test_a_helper_swapped_between_two_processes_is_compiled_again(
    shared_dir: Path, user: str, how: str
) -> None:
    skip_unless(user)
    cache = _cache(shared_dir, user)
    first = _compiled_first(user, cache)
    mark = shared_dir / "mark"
    planted = {s: _plant(user, exe, how, mark) for s, exe in first.items()}

    again = _python(user, LOOKUP, cache, *SOURCES)

    for source, exe in first.items():
        found = again[source]
        # rebuilt in place (or refused): what the next process would run is not planted
        assert found is None or Path(found).read_bytes() != planted[source], (source, how)
        assert exe.read_bytes() != planted[source], (source, how)
        fields = json.loads(compiled.record_path(exe).read_bytes())
        assert fields["sha256"] == _sha256(exe)
        assert os.stat(exe).st_uid == (NOBODY if user == "nobody" else os.geteuid())
    assert not mark.exists()


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_session_after_the_swap_does_not_run_the_planted_helpers(
    shared_dir: Path, user: str
) -> None:
    """End to end: the next session's confined command (bubblewrap, its command server
    started through ``subreaper``; as root through ``dropcaps`` too) runs, and nothing
    planted ran."""
    skip_unless(user, "bubblewrap")
    cache = _cache(shared_dir, user)
    first = _compiled_first(user, cache)
    ws = shared_dir / "ws"
    ws.mkdir()
    give(ws, user)
    mark = ws / "mark"
    for exe in first.values():
        _plant(user, exe, "renamed over", mark)
    extra = {"CODEMODE_CACHE": str(cache)}
    for command_server in (True, False):
        r = run_shell(user, ws, "echo ran", extra_env=extra, command_server=command_server)
        assert r["exit_code"] == 0 and r["output"].strip() == "ran", r
        assert not mark.exists(), mark.read_text()


def test_a_helper_without_a_record_is_not_run_by_this_process(tmp_path: Path) -> None:
    """``verified`` itself: a program this process has not built is run only if the
    record beside it, written when it was compiled, names its digest."""
    cache = tmp_path / "cache"
    folder = cache / "helpers"
    folder.mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    fake = folder / compiled.name("subreaper.c")
    fake.write_text('#!/bin/sh\nexec "$@"\n')
    fake.chmod(0o755)
    code = (
        "from pathlib import Path; import sys, json\n"
        "from codemode.sandbox.helpers import compiled\n"
        "print(json.dumps({'x': compiled.verified(Path(sys.argv[1]))}))\n"
    )
    assert _python("self", code, cache, str(fake)) == {"x": None}
    # with a record of its digest, written as codemode writes one, it is accepted
    digest = _sha256(fake)
    compiled.record_path(fake).write_bytes(compiled.record("subreaper.c", digest, "test"))
    compiled.record_path(fake).chmod(0o444)
    assert _python("self", code, cache, str(fake)) == {"x": str(fake)}
    # a record for another source (an older subreaper.c) is not one for this program
    other = json.loads(compiled.record_path(fake).read_bytes())
    other["source"] = "0" * 64
    compiled.record_path(fake).chmod(0o644)
    compiled.record_path(fake).write_text(json.dumps(other))
    assert _python("self", code, cache, str(fake)) == {"x": None}
