"""What each confinement backend promises on this machine, and which promise it cannot keep.

``interpreter policy confinement`` and ``interpreter doctor`` both print this table, so
they always agree. Each promise is kept (None) or names why not, for each backend.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemode.sandbox.confinement import landlock
from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.server import process_tree

if TYPE_CHECKING:
    from codemode.sandbox.settings import SandboxSettings


@dataclass(frozen=True)
class Promise:
    key: str
    text: str
    bubblewrap: str | None  # None: kept; else why not
    landlock: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"promise": self.text, "bubblewrap": self.bubblewrap, "landlock": self.landlock}


@functools.cache
def landlock_namespaces() -> str | None:
    """None when the Landlock fallback gets its own PID namespace and ``/proc`` here,
    else why not (tried once, in a throwaway child)."""
    plan = process_tree.Plan.for_this_process()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            if process_tree._libc().unshare(plan.flags) == 0:
                if plan.uid != 0:
                    process_tree._write("/proc/self/setgroups", "deny")
                    process_tree._write("/proc/self/uid_map", f"{plan.uid} {plan.uid} 1")
                inner = os.fork()
                if inner == 0:
                    libc = process_tree._libc()
                    libc.mount(b"none", b"/", None, process_tree.MS_REC | process_tree.MS_PRIVATE,
                               None)
                    ok = libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0
                    os._exit(0 if ok else 2)
                code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 0:
        return None
    if code == 2:
        return "a new PID namespace works here but a fresh /proc cannot be mounted"
    return "new PID namespaces are not allowed here (unprivileged user namespaces disabled?)"


def promises(settings: SandboxSettings | None = None) -> list[Promise]:
    """The promises of the restricted modes, per backend, on this machine."""
    found = probe()
    abi = landlock.abi_version()
    sc = found.seccomp
    allow_unix = bool(settings and settings.allow_unix_sockets)
    bw = found.bubblewrap
    ll = found.landlock
    ns = landlock_namespaces() if ll is None else ll

    def b(why: str | None = None) -> str | None:
        return bw or why

    def lk(why: str | None = None) -> str | None:
        return ll or why

    out = [
        Promise("capabilities", "confined commands hold no capabilities (no mount, hostname, "
                "clock, module loading or raw I/O)", b(), lk()),
        Promise("writes", "commands write only inside the writable roots", b(), lk()),
        Promise(
            "protected", "the whole .git (config, hooks, info, modules, worktrees), the "
            "files git's config names, a worktree's .git file and .codemode/ stay "
            "read-only, and .git cannot be renamed or replaced", b(),
            lk("kept only after the fact: Landlock cannot make part of a writable root "
               "read-only, so codemode puts back what a command changed there once it exits "
               "(and moves a replaced .git aside)"),
        ),
        Promise(
            "own", "codemode's own home, cache, package and Python environment stay "
            "read-only, and the folders above them cannot be renamed", b(),
            lk("a writable root that holds them is refused: Landlock cannot make part of "
               "it read-only"),
        ),
        Promise(
            "home", "in a writable root that contains the home, its dot-entries (but ~/.cache), "
            "the PATH folders in it and the folders the environment names (CODEX_HOME, ...) "
            "stay read-only; a dot-entry a command adds is moved aside when it ends", b(),
            lk("a writable root that holds them is refused: Landlock cannot make part of "
               "it read-only"),
        ),
        Promise("network", "no network unless network_access = true", b(),
                lk(None if abi >= 4 or sc is None else
                   f"Landlock ABI {abi} cannot block the network and seccomp is unavailable")),
        Promise("unix", "no Unix socket by path unless listed in allow_unix_sockets",
                b(f"seccomp is unavailable ({sc})" if sc else None),
                lk(f"seccomp is unavailable ({sc})" if sc else
                   "with allow_unix_sockets set, Landlock cannot tell socket files apart: "
                   "commands are refused" if allow_unix else None)),
        Promise("abstract", "no abstract Unix socket", b(
            None if sc is None else f"seccomp is unavailable ({sc}); only the network "
            "namespace (network_access = false) keeps them out"),
                lk(None if abi >= 6 or (sc is None and not allow_unix) else
                   f"Landlock ABI {abi} (6 needed) cannot scope abstract sockets" +
                   ("" if sc is None else f" and seccomp is unavailable ({sc})"))),
        Promise("signals", "commands cannot signal processes outside the sandbox", b(),
                lk(None if ns is None or abi >= 6 else
                   f"no PID namespace ({ns}) and Landlock ABI {abi} (6 needed) cannot "
                   "scope signals")),
        Promise("proc", "commands cannot read the /proc entries (environ) of processes outside "
                "the sandbox", b(),
                lk(None)),  # own /proc, or Landlock's ptrace restriction without capabilities
        Promise("carried", "no command changes what the next one inherits from the "
                "command server (/proc is read-only: coredump_filter, oom_score_adj...; its "
                "scheduling and limits cannot be set from inside)", b(),
                # no command server: each command starts from codemode itself, which only
                # a PID namespace with its own /proc hides
                lk(None if ns is None else
                   f"no PID namespace ({ns}): a command can write codemode's own /proc "
                   "attribute files (coredump_filter, oom_score_adj), which later commands "
                   "inherit")),
        Promise("tree", "every process a command started ends with it (setsid and "
                "double-forked ones too)", b(),
                lk(None if ns is None else
                   f"no PID namespace ({ns}): leftovers are killed when the command exits, "
                   "but not when codemode itself is killed")),
    ]
    return out
