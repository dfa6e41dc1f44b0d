"""The seccomp program itself, run on a small classic-BPF interpreter: what it answers
for system calls this kernel cannot even make (x32 numbers, the i386 entry with
``socketcall``) and for socket families with garbage in the upper half of the register.
The live sandbox tests cover the calls this machine can make."""

from __future__ import annotations

import errno
import socket
import struct

import pytest

from codemode.sandbox.confinement.confine import probe

AUDIT_ARCH_X86_64, AUDIT_ARCH_I386 = 0xC000003E, 0x40000003
RET_ALLOW, RET_KILL_PROCESS, RET_KILL_THREAD = 0x7FFF0000, 0x80000000, 0x00000000
NR = {"socket": 41, "connect": 42, "getpid": 39, "mount": 165, "unshare": 272, "clone3": 435}


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ins = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    a = x = 0
    mem = [0] * 16
    pc = 0
    while True:
        code, jt, jf, k = ins[pc]
        cls = code & 0x07
        pc += 1
        if cls == 0x00:  # LD
            mode = code & 0xE0
            a = struct.unpack_from("=I", data, k)[0] if mode == 0x20 else (
                k if mode == 0x00 else mem[k])
        elif cls == 0x01:  # LDX
            x = k if (code & 0xE0) == 0x00 else mem[k]
        elif cls == 0x02:
            mem[k] = a
        elif cls == 0x03:
            mem[k] = x
        elif cls == 0x04:  # ALU
            op, src = code & 0xF0, (x if code & 0x08 else k)
            a = {0x00: a + src, 0x10: a - src, 0x50: a & src, 0x40: a | src,
                 0xA0: a ^ src}[op] & 0xFFFFFFFF
        elif cls == 0x05:  # JMP
            op, src = code & 0xF0, (x if code & 0x08 else k)
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: a == src, 0x20: a > src, 0x30: a >= src, 0x40: bool(a & src)}[op]
            pc += jt if taken else jf
        elif cls == 0x06:  # RET
            return a if code & 0x10 else k
        elif cls == 0x07:
            a, x = (x, x) if code & 0x80 else (a, a)


def deny(e: int) -> int:
    return 0x00050000 | e


@pytest.fixture
def program() -> bytes:
    if probe().seccomp is not None:
        pytest.skip(f"seccomp cannot run on this machine: {probe().seccomp}")
    from codemode.sandbox.confinement.seccomp import bpf_program

    return bpf_program(True, True)


def test_x32_calls_fail_before_any_rule(program: bytes) -> None:
    for nr in (NR["socket"], NR["connect"], NR["getpid"], NR["mount"]):
        assert run_bpf(program, 0x40000000 | nr, AUDIT_ARCH_X86_64) == deny(errno.ENOSYS)


def test_other_architectures_are_killed(program: bytes) -> None:
    socketcall = 102  # i386
    verdict = run_bpf(program, socketcall, AUDIT_ARCH_I386, (1, 0))
    assert verdict in (RET_KILL_PROCESS, RET_KILL_THREAD)


def test_socket_families_and_the_upper_half(program: bytes) -> None:
    unix, inet = socket.AF_UNIX, socket.AF_INET
    assert run_bpf(program, NR["socket"], AUDIT_ARCH_X86_64, (unix, 1, 0)) == deny(errno.EPERM)
    assert run_bpf(program, NR["socket"], AUDIT_ARCH_X86_64, (inet, 1, 0)) == deny(errno.EPERM)
    assert run_bpf(program, NR["getpid"], AUDIT_ARCH_X86_64) == RET_ALLOW
    from codemode.sandbox.confinement.seccomp import bpf_program

    net_ok = bpf_program(False, True)  # network allowed, Unix sockets still denied
    assert run_bpf(net_ok, NR["socket"], AUDIT_ARCH_X86_64, (inet, 1, 0)) == RET_ALLOW
    for family in (unix, (1 << 32) | unix, (0xDEAD << 32) | unix):
        assert run_bpf(net_ok, NR["socket"], AUDIT_ARCH_X86_64, (family, 1, 0)) == deny(
            errno.EPERM), hex(family)
    unix_ok = bpf_program(True, False)  # Unix sockets allowed, the network not
    assert run_bpf(unix_ok, NR["socket"], AUDIT_ARCH_X86_64, (unix, 1, 0)) == RET_ALLOW
    assert run_bpf(unix_ok, NR["socket"], AUDIT_ARCH_X86_64, ((1 << 32) | inet, 1, 0)) == deny(
        errno.EPERM)


def test_new_user_namespaces_and_clone3(program: bytes) -> None:
    newuser = 0x10000000
    assert run_bpf(program, NR["unshare"], AUDIT_ARCH_X86_64, (newuser,)) == deny(errno.EPERM)
    assert run_bpf(program, NR["unshare"], AUDIT_ARCH_X86_64, (0x00020000,)) == RET_ALLOW
    assert run_bpf(program, NR["clone3"], AUDIT_ARCH_X86_64, (0, 88)) == deny(errno.ENOSYS)


@pytest.mark.parametrize("own", [True, False], ids=["command", "embedder"])
def test_the_filter_is_built_without_ldconfig_in_codemodes_own_processes(own: bool) -> None:
    """In codemode's own processes (``entry.claim()``: the command, the engine worker),
    pyseccomp's library lookups are answered without ``ctypes.util`` (whose
    ``find_library`` runs ``ldconfig -p`` in a subprocess, twice); in an embedder's,
    pyseccomp is imported as it is (no module swapped there). The filter is the one
    libseccomp builds either way."""
    import subprocess
    import sys

    if probe().seccomp is not None:
        pytest.skip(f"seccomp is not available here: {probe().seccomp}")
    code = (
        "import sys\n"
        + ("from codemode.process import entry; entry.claim()\n" if own else "")
        + "from codemode.sandbox.confinement import seccomp\n"
        "p = seccomp.bpf_program(True, True)\n"
        "print(len(p) % 8 == 0 and len(p) > 100, 'ctypes.util' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", str(not own)]
