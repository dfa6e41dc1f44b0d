"""Taking authority away from an engine worker before it runs any program.

A worker needs its pipes, memory and threads; nothing else. Once ``confine`` returns:

- no new programs (``execve``/``execveat``), no new processes (``fork``, ``vfork``,
  ``clone`` without ``CLONE_THREAD``; ``clone3`` says ENOSYS so that the C library
  falls back to ``clone``, where the flags can be checked);
- no network and no other socket (``socket``, ``socketpair``, ``connect``, ``bind``...);
- no file opened or created (``open``, ``openat``, ``openat2``, ``creat``,
  ``open_by_handle_at``), and no path changed or probed (``unlink``, ``rename``,
  ``mkdir``, ``chmod``, ``stat`` of a path, ``access``, ``readlink``...);
- no reaching into other processes (``ptrace``, ``process_vm_readv``/``writev``,
  ``kcmp``, ``pidfd_*``; ``kill``/``tgkill`` only at itself), no ``io_uring`` (which would
  do all of the above without these system calls), no ``bpf``, ``perf_event_open``,
  ``userfaultfd``, namespaces, mounts, keyrings, modules;
- no raising its own limits (``setrlimit``/``prlimit64``); and ``ioctl(TIOCSTI)`` is
  refused should a terminal ever be reachable.

Refused calls fail with EPERM. A system call made through another ABI (x32 numbers,
or the 32-bit ``int 0x80`` entry) does not match the filter's architecture and kills
the process.

Memory has an OS backstop beside the engine's own cap: ``RLIMIT_DATA`` (private
writable memory, which is where typed arrays and V8's external buffers live; V8
reserves a terabyte of address space, so ``RLIMIT_AS`` cannot be used).
"""

from __future__ import annotations

import errno
import resource
import sys

from codemode.process.pyseccomp_import import import_pyseccomp

_DENIED = (
    "execve execveat fork vfork "
    "socket socketpair connect bind listen accept accept4 sendto sendmsg sendmmsg "
    "recvfrom recvmsg recvmmsg getsockopt setsockopt "
    "open openat openat2 creat open_by_handle_at name_to_handle_at "
    "unlink unlinkat rename renameat renameat2 mkdir mkdirat rmdir link linkat "
    "symlink symlinkat chmod fchmodat fchmodat2 chown fchownat lchown truncate "
    "mknod mknodat utime utimes utimensat futimesat "
    "stat lstat access faccessat faccessat2 readlink readlinkat statfs chdir chroot "
    "inotify_add_watch fanotify_init fanotify_mark "
    "ptrace process_vm_readv process_vm_writev kcmp pidfd_open pidfd_getfd "
    "pidfd_send_signal tkill "
    "io_uring_setup io_uring_enter io_uring_register "
    "bpf perf_event_open userfaultfd unshare setns mount umount2 pivot_root "
    "fsopen fsmount fsconfig fspick move_mount open_tree mount_setattr "
    "keyctl add_key request_key init_module finit_module delete_module "
    "kexec_load kexec_file_load reboot swapon swapoff acct quotactl "
    "setrlimit prlimit64 personality settimeofday clock_settime adjtimex "
    "sethostname setdomainname setuid setgid setreuid setregid setresuid setresgid "
    "setgroups setfsuid setfsgid capset"
).split()

_CLONE_THREAD = 0x00010000
_TIOCSTI = 0x5412
_AT_EMPTY_PATH = 0x1000
# Room beside the engine's cap for the worker's own Python objects (a program's
# output passes through them) and the engine's bookkeeping.
_SLACK_BYTES = 128 * 1024 * 1024


def private_memory_bytes() -> int:
    """The process's VmData: the memory ``RLIMIT_DATA`` counts."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_memory(engine_cap_bytes: int) -> int:
    """Cap private writable memory at what the worker holds now plus twice the engine's
    cap (a value crosses the engine and Python once each) plus slack; returns it."""
    cap = private_memory_bytes() + 2 * engine_cap_bytes + _SLACK_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return cap


def install_filter(own_pid: int) -> None:
    """Load the seccomp filter described above into this process (all its threads)."""
    sc = import_pyseccomp()

    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.CTL_NNP, 1)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)  # V8's threads too
    # A call through a foreign ABI (x32, int 0x80) kills the whole process, not only
    # the thread that made it.
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in _DENIED:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            continue  # not a system call on this architecture
    # A new thread is fine; a new process is not.
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # Signals only to itself (the C library's raise/abort use tgkill on the process).
    f.add_rule(deny, "kill", sc.Arg(0, sc.NE, own_pid))
    f.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, own_pid))
    f.add_rule(deny, "ioctl", sc.Arg(1, sc.EQ, _TIOCSTI))
    # fstat() is newfstatat(fd, "", AT_EMPTY_PATH); a path lookup is not.
    f.add_rule(deny, "newfstatat", sc.Arg(3, sc.MASKED_EQ, _AT_EMPTY_PATH, 0))
    f.add_rule(deny, "statx", sc.Arg(2, sc.MASKED_EQ, _AT_EMPTY_PATH, 0))
    f.load()


def confine(engine_cap_bytes: int, own_pid: int) -> None:
    """Limit memory, then install the filter. Call after every import and before the
    first request is read."""
    limit_memory(engine_cap_bytes)
    if sys.platform == "linux":
        install_filter(own_pid)
