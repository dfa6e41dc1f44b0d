"""Removing a folder a program shaped (a batch script's copy, an eval run's workspace),
from codemode's own process, once nothing confined runs in it any more.

Only removals that walk by descriptor, following no link planted in the tree, are used:
the writer's ``remove_folder`` (a loop, whatever the tree's depth), then ``rm -rf``. The
program may have left folders without write permission (0555: an unprivileged remover
cannot take their entries out): for those the tree's permissions are opened (``chmod -R
u+rwx``, which follows no link it meets on the way) and ``rm -rf`` removes it. What
still cannot be removed is left, as a process killed midway would leave it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, as far as it can be."""
    from codemode.hostfs.writer import remove_folder

    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        remove_folder(parent, path.name)
    except OSError:
        pass  # (a folder it may not empty: below)
    finally:
        os.close(parent)
    if os.path.lexists(path):
        _by_commands(path)


def _by_commands(path: Path) -> None:
    from codemode.locations import launcher

    for argv in (["chmod", "-R", "u+rwx", "--", str(path)], ["rm", "-rf", "--", str(path)]):
        try:
            launcher.run(argv, names_files=False, stdin=subprocess.DEVNULL,
                         capture_output=True, timeout=600)  # fmt: skip
        except (OSError, subprocess.SubprocessError, launcher.LaunchRefused):
            return  # left in the temporary folder
