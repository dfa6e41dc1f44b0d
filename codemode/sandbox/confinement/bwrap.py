"""bubblewrap: the preferred confinement on Linux.

The command sees the whole filesystem read-only (``--ro-bind / /``) with the writable
roots bound read-write on top. Inside them what ``codemode.sandbox.protection.protected`` names is
bound read-only again (``protect_binds``). The command holds no capability in any set,
also when codemode runs as root (no mount, no sethostname, no clock setting, no module
loading, no raw I/O; ``isolation`` says how), and runs with no_new_privs; it gets a
fresh ``/dev`` and a read-only ``/proc``, its own PID, IPC and UTS namespaces, no network namespace
access unless allowed, and dies with its parent. When
its first process exits, the PID namespace ends and with it every process the command
left behind, ``setsid`` and double-forked ones included.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from codemode.locations import launcher
from codemode.locations.host_programs import host_program
from codemode.sandbox.helpers import dropcaps
from codemode.sandbox.protection import own_paths
from codemode.sandbox.protection.protected import (
    CODEMODE_DIR,
    GIT_DIR,
    git_dirs,
)

# Options every confined command gets (see the module docstring).
_COMMON = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session")
# Not root: a user namespace in which the command holds nothing and may make no other.
_UNPRIVILEGED = ("--unshare-user", "--disable-userns", "--cap-drop", "ALL")
# Root: no user namespace (in one, root could not even enter another user's folders to
# set up the mounts); bubblewrap drops every capability but CAP_SETPCAP, which the
# dropcaps helper (else setpriv) uses to empty the bounding set before it runs the
# command with nothing.
_ROOT = ("--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP")
_SETPRIV_ARGS = ("--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--")


# Exits 3 unless every capability set of the shell is empty (sh builtins only).
_NO_CAPS = (
    'while read -r k v; do case "$k" in Cap*:) case "$v" in *[!0]*) exit 3;; esac;; esac; '
    "done < /proc/self/status"
)
# False once the helper failed the probe (``available``): setpriv is used from then on.
_helper_allowed = True


def isolation() -> tuple[list[str], list[str]]:
    """bwrap options, and the words to put before the command."""
    if os.geteuid() == 0:
        exe = dropcaps.path() if _helper_allowed else None
        if exe is not None:
            return [*_ROOT, *_COMMON], [exe]
        setpriv = _setpriv()
        if setpriv is not None:
            return [*_ROOT, *_COMMON], [setpriv, *_SETPRIV_ARGS]
    return [*_UNPRIVILEGED, *_COMMON], []


def _setpriv() -> str | None:
    return host_program("setpriv")  # (cached by PATH: ``host_programs``)


def executable() -> str | None:
    # outside every writable root: bubblewrap runs with our authority, as root too
    return host_program("bwrap")


# ``available``'s verdicts (and whether the helper passed), by the programs the probe
# ran (``_probed_programs``): a process probes once for the same programs. A warm server
# probes before it forks (``codemode.launch.serve``), and its runs take that verdict
# only while they would run the very same files (their PATH, cache folder and the files
# themselves unchanged); a run that would find others probes them itself.
_verdicts: dict[tuple[object, ...], tuple[str | None, bool]] = {}


# The programs' key as this process found it, by what finds them (PATH, the helpers'
# cache folder): asked before every command, and looked up once per process and
# setting; a forked process (a warm run) looks again.
_found: dict[tuple[object, ...], tuple[object, ...]] = {}
_FINDING = ("PATH", "CODEMODE_CACHE", "XDG_CACHE_HOME", "HOME")


def available() -> str | None:
    """None when bubblewrap works here, else why not (tried once per process for the
    same programs)."""
    global _helper_allowed
    where = (os.getpid(), *(os.environ.get(name) for name in _FINDING))
    key = _found.get(where)
    if key is None:
        key = _found[where] = _probed_programs()
    if key not in _verdicts:
        _helper_allowed = True
        why = _probe()
        _verdicts[key] = (why, _helper_allowed)
    why, _helper_allowed = _verdicts[key]
    return why


def forget_failures() -> None:
    """Drop the verdicts that bubblewrap does not work: what a warm server found before
    a fix (bubblewrap installed, user namespaces allowed) is not its runs' answer."""
    global _helper_allowed
    for key, (why, helper) in list(_verdicts.items()):
        if why is not None or not helper:
            del _verdicts[key]
    _helper_allowed = True


def _probed_programs() -> tuple[object, ...]:
    """The files the probe runs (bubblewrap; as root, the helper and setpriv), each by
    its real path and identity, and who runs them."""
    names: list[str | None] = [executable()]
    if os.geteuid() == 0:
        names += [dropcaps.path(), _setpriv()]
    return (os.geteuid(), *(_identity(n) for n in names))


def _identity(path: str | None) -> tuple[object, ...] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (path,)
    real = os.path.realpath(path)
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _probe() -> str | None:
    exe = executable()
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    global _helper_allowed
    base = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    while True:
        opts, prefix = isolation()
        probe = [*base, *opts, "--unshare-net"]
        try:
            # The helper is probed as a command runs: under the seccomp filter too; and
            # what it starts must hold no capability in any set, or it is not used.
            proc = _run_filtered(probe, [*prefix, "/bin/sh", "-c", _NO_CAPS])
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap does not run here: {exc}"
        uses_helper = len(prefix) == 1  # [dropcaps]; setpriv comes with its options
        if proc.returncode == 0 or not uses_helper:
            break
        _helper_allowed = False  # the helper does not work here: try setpriv
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
        return f"bubblewrap does not work here ({detail}); user namespaces may be disabled"
    return None


def _run_filtered(opts: list[str], argv: list[str]) -> subprocess.CompletedProcess[str]:
    """bubblewrap with ``opts`` running ``argv`` under the strictest seccomp filter
    (network and Unix sockets denied) where seccomp works here."""
    from codemode.sandbox.confinement import seccomp

    if seccomp.available() is not None:
        return launcher.run([*opts, "--", *argv], capture_output=True, text=True, timeout=10,
                            names_files=False)  # (a probe: its own fixed command line)
    r, w = os.pipe()
    try:
        os.write(w, seccomp.bpf_program(deny_network=True, deny_unix=True))
    finally:
        os.close(w)
    try:
        return launcher.run(
            [*opts, "--seccomp", str(r), "--", *argv],
            names_files=False,
            capture_output=True,
            text=True,
            timeout=10,
            pass_fds=(r,),
        )
    finally:
        os.close(r)


def options(
    *,
    writable: Sequence[Path],
    network: bool,
    hide_sockets: Iterable[Path] = (),
    read_only: Iterable[Path] = (),
    nested_git: Iterable[Path] = (),
) -> tuple[list[str], list[str]]:
    """bwrap and its options, and the words to put between them and the command.

    The command sees the filesystem, namespaces and capabilities these give it; the
    caller adds ``--seccomp FD``, ``--chdir`` and ``--``. ``hide_sockets``: Unix socket
    files covered with an empty file (used when some sockets are allowed, so that only
    those stay reachable). ``read_only``: more folders inside the writable roots to bind
    read-only (``.codemode/`` below the top). ``nested_git``: ``.git`` entries below the
    tops, protected like the top ones. The same for every command of a session while the
    protected entries stay as they are: a command server (``command_servers``) is
    reused while they do."""
    exe = executable() or "bwrap"
    # /dev itself read-only (its device nodes, /dev/shm and /dev/pts stay usable): a
    # command cannot leave a file or replace a link there (/dev/fd, /dev/stdin) for the
    # commands after it in the same sandbox to meet.
    out = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm"]
    # /proc read-only: no command writes an attribute file of a process it can see
    # (``/proc/1/coredump_filter``, ``oom_score_adj``, ``autogroup``... of the command
    # server, which every later command would inherit; as root those files are the
    # command's own user's). Its own descriptors (/proc/self/fd/1) stay writable: the
    # file they lead to is not on /proc.
    out += ["--remount-ro", "/dev", "--proc", "/proc", "--remount-ro", "/proc"]
    for root in writable:
        out += ["--bind", str(root), str(root)]
    # codemode's own state and installation inside a root (a workspace that is the home
    # folder): the folders on the way pinned first, the paths read-only last
    pins, own = own_paths.pin_and_protect(writable)
    out += pins
    for root in writable:
        out += protect_binds(root, writable)
    for p in read_only:  # .codemode/ below the tops, files git's config names
        if (p.is_dir() or p.is_file()) and not p.is_symlink():
            out += _ro(p)
    for g in nested_git:
        if os.path.lexists(g):
            out += git_binds(g.parent, top=False, writable=writable)
    out += own
    for sock in hide_sockets:
        out += ["--ro-bind", "/dev/null", str(sock)]
    opts, prefix = isolation()
    out += [*opts]
    if not network:
        out.append("--unshare-net")
    return out, prefix


def placeholders(root: Path) -> list[Path]:
    """Folders ``protect_binds`` makes the bind target of when absent (bubblewrap leaves
    them behind, empty; the session removes them again)."""
    out = [root / CODEMODE_DIR]
    git = root / GIT_DIR
    if not os.path.lexists(git):
        out.append(git)
    return [p for p in out if not os.path.lexists(p)]


def protect_binds(root: Path, writable: Sequence[Path] = ()) -> list[str]:
    """Binds keeping a writable root's protected parts read-only and in place.

    A mount point cannot be renamed, removed or replaced: ``.codemode/`` and ``.git``
    are bound read-only as wholes (``git_binds``). A missing ``.codemode/`` or a missing
    or empty ``.git`` becomes an empty read-only mount, so the command cannot create one
    (a new ``.git`` would be a repository whose settings it chose).
    """
    out: list[str] = []
    cm = root / CODEMODE_DIR
    if cm.is_symlink():
        out += _ro(cm.resolve()) if cm.resolve().is_dir() else []
    elif cm.is_dir():
        out += _ro(cm)
    elif not cm.exists():
        out += ["--tmpfs", str(cm), "--remount-ro", str(cm)]
    return out + git_binds(root, top=True, writable=writable)


def git_binds(root: Path, *, top: bool, writable: Sequence[Path] = ()) -> list[str]:
    """The binds for ``root/.git``; ``top``: the top of a writable root, where a missing
    ``.git`` gets a stand-in.

    The whole git directory is read-only, as Codex has it: config, hooks, info,
    ``modules/**`` and ``worktrees/*`` alike, and a file the user's own ``git config``
    renames over ``.git/config`` while a command runs is read-only too (a bind of the
    folder shows what is in it now; a bind of the file would keep the old one). A
    ``.git`` file (``gitdir: ...``) is read-only, and the git directory it names too
    when that lies in a writable root. What is left writable is the work tree: commands
    read the repository (status, diff, log), they do not change it."""
    git = root / GIT_DIR
    if git.is_symlink() or (git.exists() and not (git.is_dir() or git.is_file())):
        target = git.resolve()
        return _ro(target) if target.exists() else []
    if git.is_file():
        out = _ro(git)  # a worktree's or submodule's "gitdir: ..." file
        for gitdir in git_dirs(root, writable or [root]):
            out += _ro(gitdir)
        return out
    if top and (not git.exists() or _empty_dir(git)):
        # An empty .git (mostly the mount point left by an earlier call) is no
        # repository yet: it stays empty and read-only like a missing one.
        return ["--tmpfs", str(git), "--remount-ro", str(git)]
    return _ro(git) if git.is_dir() else []


def _empty_dir(p: Path) -> bool:
    try:
        with os.scandir(p) as it:
            return next(it, None) is None
    except OSError:
        return False


def _ro(p: Path) -> list[str]:
    return ["--ro-bind", str(p), str(p)]
