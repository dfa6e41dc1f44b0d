"""An engine worker that, once confined, tries what its filter forbids (for tests).

    python -m codemode_testkit.worker_probe ENGINE [x32]

Boots exactly as a worker does (``worker._boot``: the engine imported, memory capped,
seccomp loaded), runs a program in a fresh isolate to show the engine still works,
then makes each forbidden call as an engine escape would and prints one JSON object:
call name -> the errno it failed with, or "allowed". With ``x32`` it makes one system
call through the x32 ABI instead, which must kill it (SIGSYS).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import socket
import sys
import threading
from collections.abc import Callable

from codemode.js_runtime.worker import _boot

_X32_BIT = 0x40000000
_NR = {  # x86_64 numbers, for calls Python has no wrapper for
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "io_uring_setup": 425, "bpf": 321, "userfaultfd": 323, "unshare": 272,
    "perf_event_open": 298, "clone3": 435, "getpid": 39, "openat2": 437,
}  # fmt: skip


def _errno_of(call: Callable[[], object]) -> int | str:
    try:
        call()
    except OSError as exc:
        return exc.errno or -1
    except ValueError:  # how Python reports setrlimit's EPERM
        return errno.EPERM
    return "allowed"


def main() -> None:
    engine = sys.argv[1]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    parent = os.getppid()
    buf = ctypes.create_string_buffer(256)

    def raw(name: str, *args: int | ctypes.Array) -> Callable[[], None]:
        def call() -> None:
            if libc.syscall(_NR[name], *args) < 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))

        return call

    Engine = _boot(engine, 64 * 1024 * 1024)
    if len(sys.argv) > 2 and sys.argv[2] == "x32":
        libc.syscall(_X32_BIT | _NR["getpid"])
        print(json.dumps({"x32": "allowed"}), flush=True)
        return
    isolate = Engine(64 * 1024 * 1024)
    isolate.on_log = None
    works = isolate.step("globalThis.__cm = {drain() { return String(6 * 7); }}")
    thread_ok: list[bool] = []
    thread = threading.Thread(target=lambda: thread_ok.append(True))
    thread.start()
    thread.join()
    results: dict[str, object] = {
        "engine works": works,
        "thread": bool(thread_ok),
        "open existing file": _errno_of(lambda: open("/etc/hostname", "rb")),
        "create file": _errno_of(lambda: os.open("/tmp/codemode-probe", os.O_CREAT | os.O_WRONLY)),
        "openat2": _errno_of(
            raw("openat2", -100, ctypes.create_string_buffer(b"/etc/passwd"), buf, 24)
        ),
        "execve": _errno_of(lambda: os.execv("/bin/true", ["true"])),
        "fork": _errno_of(os.fork),
        "clone3": _errno_of(raw("clone3", buf, 88)),
        "socket": _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
        "unix socket": _errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        "socketpair": _errno_of(socket.socketpair),
        "ptrace parent": _errno_of(raw("ptrace", 16, parent, 0, 0)),
        "process_vm_writev": _errno_of(raw("process_vm_writev", parent, buf, 1, buf, 1, 0)),
        "process_vm_readv": _errno_of(raw("process_vm_readv", parent, buf, 1, buf, 1, 0)),
        "io_uring_setup": _errno_of(raw("io_uring_setup", 4, buf)),
        "bpf": _errno_of(raw("bpf", 0, buf, 48)),
        "userfaultfd": _errno_of(raw("userfaultfd", 0)),
        "unshare": _errno_of(raw("unshare", 0x10000000)),
        "perf_event_open": _errno_of(raw("perf_event_open", buf, 0, -1, -1, 0)),
        "kill parent": _errno_of(lambda: os.kill(parent, 0)),
        "unlink": _errno_of(lambda: os.unlink("/tmp/codemode-probe-none")),
        "mkdir": _errno_of(lambda: os.mkdir("/tmp/codemode-probe-dir")),
        "stat": _errno_of(lambda: os.stat("/etc/hostname")),
        "raise memory limit": _errno_of(lambda: resource.setrlimit(resource.RLIMIT_DATA, (-1, -1))),
    }
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
    os._exit(0)
