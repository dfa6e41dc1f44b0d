"""bubblewrap: the preferred confinement on Linux.

The command sees the whole filesystem read-only (``--ro-bind / /``), the writable roots
bound read-write on top, and inside them ``.codemode/`` and ``.git/hooks`` bound
read-only again. It gets a fresh ``/dev`` and ``/proc``, its own PID namespace, no
network namespace access unless allowed, and dies with its parent.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.paths import PROTECTED_SUBPATHS


def executable() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def available() -> str | None:
    """None when bubblewrap works here, else why not (tried once per process)."""
    exe = executable()
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [
        exe,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--",
        "true",
    ]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not run here: {exc}"
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
        return f"bubblewrap does not work here ({detail}); user namespaces may be disabled"
    return None


def argv(
    command: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    network: bool,
    seccomp_fd: int | None,
) -> list[str]:
    """The bwrap command line that runs ``command`` confined."""
    exe = executable() or "bwrap"
    out = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in writable:
        out += ["--bind", str(root), str(root)]
    for root in writable:
        for sub in PROTECTED_SUBPATHS:
            p = root / sub
            if p.is_dir() and not p.is_symlink():
                out += ["--ro-bind", str(p), str(p)]
            elif sub == ".codemode" and not p.exists() and not p.is_symlink():
                # Nothing to protect yet, but the command must not create it either:
                # an empty read-only tmpfs takes its place (bwrap leaves an empty folder).
                out += ["--tmpfs", str(p), "--remount-ro", str(p)]
    out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"]
    if not network:
        out.append("--unshare-net")
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    out += ["--chdir", str(cwd), "--", *command]
    return out
