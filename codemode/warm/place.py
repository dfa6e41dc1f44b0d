"""Whether warm starts are wanted, and where this user's server for this installation
listens.

Standard library only, and cheap: the launcher asks this before anything else loads.

The socket lives in a folder only this user may enter (``$XDG_RUNTIME_DIR/codemode``,
else ``/tmp/codemode-UID``, the code-mode host's folder). Its name is a digest of
everything a process takes from its start that a forked one could not change: the
Python executable, the installed package (its folder, and the identity of the files
an upgrade rewrites), the user's ids and groups, the priority, the CPU affinity, the
control group, the OOM score, and the environment variables Python reads at start
(``PYTHON*``, the locale). A caller differing in any of
these reaches another server (or starts one); it never reaches one started otherwise.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from socket import socket as Socket

# CODEMODE_WARM: "0" (or false/no/off) refuses warm starts, anything else asks for them;
# unset, the config file's top-level ``warm`` key decides (default: on).
ENV = "CODEMODE_WARM"
_OFF = frozenset({"0", "false", "no", "off"})
# A Unix socket's path has room for 107 bytes (sun_path).
_MAX_PATH = 107
# What Python reads from the environment while it starts (before any module of ours):
# a server started under other values would not be the process the caller would get.
START_VARIABLES = ("LANG", "LANGUAGE", "TZ")
START_PREFIXES = ("PYTHON", "LC_")


def enabled(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether this command should try the warm server: yes, unless turned off."""
    value = environ.get(ENV)
    if value is not None and value.strip():
        return value.strip().lower() not in _OFF
    return _config_says(environ)


def _config_says(environ: os._Environ[str] | dict[str, str]) -> bool:
    home = environ.get("CODEMODE_HOME") or os.path.join(os.path.expanduser("~"), ".codemode")
    try:
        with open(os.path.join(home, "config.toml"), "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return True  # no config file: the default
    if b"warm" not in data:
        return True  # the common case, without loading tomllib
    import tomllib

    try:
        value = tomllib.loads(data.decode()).get("warm")
    except (ValueError, UnicodeDecodeError):
        return False  # the cold start says what is wrong with the file
    return value is not False  # not a boolean: the command's config check says so


def private(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a real folder of this user that no one else may enter."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def listen_at(path: str) -> tuple[Socket, int]:
    """A listening Unix socket bound at ``path`` (in a private folder of this user, else
    SystemExit), and its inode.

    Bound at its final name, never renamed into it: the kernel lists a socket by the
    name it was bound as, and the sandbox's allow-list covers the sockets it lists. The
    caller's lock says no live server has this name; a socket file there is a dead
    one's."""
    import socket  # (the server's side: the launcher imports no ``socket``)

    folder = os.path.dirname(path)
    if not private(folder):
        raise SystemExit(f"warm: {folder} is not a private folder of this user")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    # Made 0600 by the bind itself, never changed by its name afterwards: a folder whose
    # parent others may write can be swapped for theirs after the check above, and a
    # chmod by name would then follow the link they put in the socket's place.
    mask = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(mask)
    st = os.lstat(path)
    if not private(folder) or not stat.S_ISSOCK(st.st_mode) or st.st_mode & 0o077:
        sock.close()
        raise SystemExit(f"warm: {folder} changed while the server bound its socket")
    sock.listen(64)
    return sock, st.st_ino


# (getsockopt) Linux 6.5: a pidfd of a Unix socket's peer, which its pid's reuse cannot
# fool: what the server and its callers pin each other by while they compare.
SO_PEERPIDFD = 77
# The lines of /proc/PID/status that a forked process would take from its parent.
_STATUS_FIELDS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                  "NoNewPrivs", "Seccomp", "Seccomp_filters", "Cpus_allowed_list",
                  "Mems_allowed_list")  # fmt: skip
# Other files of /proc/PID that a fork inherits: the control group (its memory and CPU
# limits), the OOM score (`choom`), the personality (`setarch -R`: no address
# randomisation).
_PROC_FILES = ("cgroup", "oom_score_adj", "personality")
_NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts")


def process_facts(pid: int | str) -> dict[str, str] | None:
    """What of process ``pid`` a server and its caller compare with their own (each
    serves, or is served by, only a process it could not tell from itself: ``peer``
    on the server's side, ``client`` on the caller's), or None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            lines = dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
        found = {k: lines.get(k, "").strip() for k in _STATUS_FIELDS}
        for name in _PROC_FILES:
            try:
                with open(f"/proc/{pid}/{name}") as f:
                    found[name] = f.read(4096)
            except PermissionError:  # personality: readable by the process's owner only
                found[name] = "?"
        with open(f"/proc/{pid}/stat") as f:
            stat_fields = f.read().rsplit(")", 1)[1].split()
        # Its priority (nice) and scheduling policy (`chrt`: SCHED_IDLE, SCHED_BATCH;
        # and the real-time priority), which a fork would take from the server too.
        found["nice"] = stat_fields[16]
        found["policy"] = f"{stat_fields[38]} {stat_fields[37]}"
        # Its I/O priority (`ionice`), which a fork takes too, and no /proc file says.
        io = ioprio(0 if pid == "self" else int(pid))
        if io is None:
            return None
        found["ioprio"] = io
        for ns in _NAMESPACES:
            try:
                found["ns:" + ns] = os.readlink(f"/proc/{pid}/ns/{ns}")
            except FileNotFoundError:
                found["ns:" + ns] = ""  # a namespace this kernel lacks
    except (OSError, IndexError):
        return None
    return found


# ioprio_get's number where it is known (arch/*/syscall.tbl, by the machine and whether
# this process is 64-bit): a number guessed wrong would make some other system call.
_IOPRIO_GET = {("x86_64", True): 252, ("x86_64", False): 290, ("aarch64", True): 31,
               ("aarch64", False): 315, ("arm", False): 315, ("riscv64", True): 31,
               ("loongarch64", True): 31, ("ppc64le", True): 274, ("ppc64", True): 274,
               ("ppc64", False): 274, ("ppc", False): 274, ("s390x", True): 283}  # fmt: skip
_IOPRIO_WHO_PROCESS = 1
_syscall: Callable[[int, int, int], int] | None = None


def ioprio(pid: int) -> str | None:
    """The I/O priority (class and level) of process ``pid`` (0: this one), as text;
    "none" where this kernel has no I/O priorities (ENOSYS); None where it cannot be
    read (another error, a machine whose number for the call is not known here): the
    caller then compares nothing, and starts cold.

    Through ``_ctypes`` (compiled) alone: ``ctypes`` is ~4 ms of the launcher's start,
    this ~0.5 ms, paid only where there is a server to check."""
    global _syscall
    machine = os.uname().machine
    if machine.startswith(("i386", "i486", "i586", "i686")):
        machine = "x86_64"  # (the same 32-bit numbers under either kernel)
    elif machine.startswith("arm"):
        machine = "arm"
    number = _IOPRIO_GET.get((machine, sys.maxsize > 2**32))
    if number is None:
        return None
    import _ctypes

    if _syscall is None:
        # ctypes' c_long and c_int, and a function type as ``CDLL`` makes one.
        class _Long(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "l"

        class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "i"

        class _Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _argtypes_ = (_Long, _Int, _Int)
            _restype_ = _Long

        # (None: this program's own symbols, the C library's among them)
        libc = _ctypes.dlopen(None, os.RTLD_NOW)  # type: ignore[arg-type]
        _syscall = _Function(_ctypes.dlsym(libc, "syscall"))
    _ctypes.set_errno(0)
    found = _syscall(number, _IOPRIO_WHO_PROCESS, pid)
    if found >= 0:
        return str(found)
    import errno  # (compiled)

    return "none" if _ctypes.get_errno() == errno.ENOSYS else None


def package_folder() -> str:
    """codemode's folder (``os.path``, not ``pathlib``: pathlib is ~2 ms of the
    launcher's start)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def facts(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """What a server and its callers must share (see the module's doc), as ASCII text
    (``ascii()``, not JSON: ``json`` is ~3 ms of the launcher's start): a caller sends
    them, and a server serves only its own."""
    package = package_folder()
    files = []
    for name in ("__init__.py", "version.py", "warm/server.py"):
        try:
            st = os.stat(os.path.join(package, name))
            files.append([name, st.st_ino, st.st_mtime_ns, st.st_size])
        except OSError:
            files.append([name])
    start = sorted(
        (k, v)
        for k, v in environ.items()
        if k in START_VARIABLES or k.startswith(START_PREFIXES)
    )
    facts = [
        os.path.abspath(sys.executable), os.path.abspath(sys.prefix),
        package,
        files,
        os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups()),
        os.getpriority(os.PRIO_PROCESS, 0),
        sorted(os.sched_getaffinity(0)),
        _proc_self("cgroup"), _proc_self("oom_score_adj"),
        start,
        # Python's own options (-X, -O, -B...): ``python -X dev interpreter`` is another
        # process than a plain one.
        list(sys.flags), sorted(sys._xoptions.items()),
    ]  # fmt: skip
    return ascii(facts)


def _proc_self(name: str) -> str:
    try:
        with open(f"/proc/self/{name}") as f:
            return f.read(4096)
    except OSError:
        return ""


def key(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """The socket's name for ``facts``: a digest to keep callers that differ apart (the
    server compares the facts themselves). zlib, not hashlib: hashlib loads OpenSSL,
    ~8 ms of the launcher's start."""
    import zlib

    data = facts(environ).encode("ascii")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{zlib.crc32(data[::-1]):08x}"


def runtime_folder(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """This user's private folder for servers' sockets (made if need be), or raise
    OSError when there is none."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    candidates = [os.path.join(runtime, "codemode")] if os.path.isabs(runtime) else []
    candidates.append(f"/tmp/codemode-{os.geteuid()}")
    for folder in candidates:
        if len(os.fsencode(folder)) > _MAX_PATH - 40:
            continue  # no room for the socket's name
        try:
            os.mkdir(folder, 0o700)
        except OSError:  # there already (checked below), or not to be made
            pass
        if private(folder):
            return folder
    raise OSError("no private folder for the warm server's socket")


def socket_path(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    return os.path.join(runtime_folder(environ), f"warm-{key(environ)}.sock")


def served(path: str) -> int:
    """How many commands the server on ``path`` has run (0 if none runs)."""
    try:
        with open(path + ".lock", "rb") as f:
            fields = f.read(64).split()
        return int(fields[1]) if serving(path) and len(fields) > 1 else 0
    except (OSError, ValueError):
        return 0


def serving(path: str) -> int:
    """The pid of the server holding ``path`` (its lock is taken), or 0. Asked without
    connecting, since every connection is served."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            return int(os.pread(fd, 32, 0).split()[0])
        except (OSError, ValueError, IndexError):
            return -1
    finally:
        os.close(fd)  # closing drops a lock it took
    return 0
