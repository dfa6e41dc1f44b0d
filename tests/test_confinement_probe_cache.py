"""Whether bubblewrap works is probed once per process *for the same programs*: a warm
server probes before it forks, so its runs take that verdict, but only while they would
run the very files it probed. A run whose PATH finds another bubblewrap, or whose
bubblewrap was replaced at the same path, probes again: a verdict on one program never
vouches for another. (Fails with a verdict cached once per process.) Within one process
the files are looked at once per PATH and cache folder, as a cold process probes once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.sandbox.confinement import bwrap

# Prints the verdict with PATH as given, then with FOLDER first on it, then as given
# again; then, in a forked process, with FOLDER's bwrap replaced by a refusing one at the
# same path.
_PROBES = r"""
import os, shutil, sys
from codemode.sandbox.confinement import bwrap
folder, refusing = sys.argv[1], sys.argv[2]
usual = os.environ["PATH"]
print(repr(bwrap.available()))
os.environ["PATH"] = folder + ":" + usual
print(repr(bwrap.available()))
os.environ["PATH"] = usual
print(repr(bwrap.available()))
os.environ["PATH"] = folder + ":" + usual
os.replace(refusing, os.path.join(folder, "bwrap"))
sys.stdout.flush()
pid = os.fork()  # as a warm server forks a run: the run looks at the files again
if pid == 0:
    print(repr(bwrap.available()), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""

_REFUSING = '#!/bin/sh\necho "this bwrap refuses" >&2\nexit 1\n'


def test_a_verdict_holds_only_for_the_programs_it_probed(tmp_path: Path) -> None:
    if (why := bwrap.available()) is not None:
        pytest.skip(f"bubblewrap: {why}")
    real = bwrap.executable()
    assert real is not None
    folder = tmp_path / "other"
    folder.mkdir()
    shutil.copy2(real, folder / "bwrap")  # another file: a copy that works as well
    refusing = tmp_path / "refusing"
    refusing.write_text(_REFUSING)
    refusing.chmod(0o755)
    done = subprocess.run([sys.executable, "-c", _PROBES, str(folder), str(refusing)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, copy, again, replaced = done.stdout.splitlines()
    assert (first, copy, again) == ("None", "None", "None")
    assert "this bwrap refuses" in replaced, replaced


def test_a_warm_server_keeps_no_verdict_that_bubblewrap_fails(tmp_path: Path) -> None:
    """What a server found before bubblewrap was installed or allowed is not its runs'
    answer: it forgets every failure, and a run probes again."""
    refusing = tmp_path / "bwrap"
    refusing.write_text(_REFUSING)
    refusing.chmod(0o755)
    code = (
        "import os, sys\n"
        "from codemode.sandbox.confinement import bwrap\n"
        "os.environ['PATH'] = sys.argv[1]\n"
        "print('refused' if bwrap.available() else 'works')\n"
        "bwrap.forget_failures()\n"
        "print(len(bwrap._verdicts))\n"
    )
    env = {**os.environ, "CODEMODE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "0"]
