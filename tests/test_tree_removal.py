"""Removing a temporary folder a program shaped (``hostfs.removal.remove_tree``: a batch
copy, an eval run's workspace), as root and as nobody: a tree deeper than Python's
``rmtree`` recurses, folders left 0555 and 0000 with files in them, and a link out of
the tree, which must not be followed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from confinement_support import (
    REPO,
    SYSTEM_PYTHON,
    _as_nobody,
    _site_packages,
    give,
    shared_dir,
    skip_unless,
)

__all__ = ["shared_dir"]  # a fixture

SHAPE = """
import os, sys
top = sys.argv[1]
fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for _ in range(1500):
    os.mkdir("d", dir_fd=fd)
    inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = inner
os.close(fd)
for mode, name in ((0o555, "locked"), (0o000, "closed")):
    os.makedirs(os.path.join(top, name, "inner"))
    open(os.path.join(top, name, "inner", "f"), "w").write("x")
    os.chmod(os.path.join(top, name, "inner"), mode)
    os.chmod(os.path.join(top, name), mode)
os.symlink(sys.argv[2], os.path.join(top, "out"))
"""
REMOVE = "import sys; from pathlib import Path\n" \
         "from codemode.hostfs.removal import remove_tree\nremove_tree(Path(sys.argv[1]))\n"


def test_a_deep_locked_tree_is_removed_and_a_link_out_is_not_followed(
    shared_dir: Path, user: str
) -> None:
    skip_unless(user)
    # (its parent the remover's own, as the temporary folder's sticky bit gives)
    tree, kept = shared_dir / "tmp" / "scratch", shared_dir / "kept"
    tree.mkdir(parents=True)
    (kept / "inner").mkdir(parents=True)
    (kept / "inner" / "file").write_text("mine")
    give(tree.parent, user)
    prefix = _as_nobody() if user == "nobody" else []
    env = {"PYTHONPATH": f"{REPO}:{_site_packages()}", "PATH": os.environ.get("PATH", "")}
    for script, args in ((SHAPE, [str(tree), str(kept)]), (REMOVE, [str(tree)])):
        done = subprocess.run([*prefix, SYSTEM_PYTHON, "-c", script, *args], env=env,
                              capture_output=True, text=True, cwd="/", timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert not os.path.lexists(tree), sorted(os.listdir(tree))
    assert (kept / "inner" / "file").read_text() == "mine"
