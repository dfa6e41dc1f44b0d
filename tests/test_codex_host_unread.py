"""A client that stops reading its host's stdout holds only the bytes written for it:
the host's loop goes on (here: a program's time limit still stops it), and the host
stops reading that client until it reads again; and what it was answered reaches it
even when its input ended first. The framed protocol (gRPC's stdio shares the writer:
`wire/stdio.py`; its own floods are in test_codex_host_h2.py)."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

from tests.codex_host_support import INTERPRETER
from tests.test_codex_host_framed_bounds import RawPeer, _outcome, _texts

LIMIT_S = 4
ANSWER = 100_000


def _children(pid: int) -> dict[int, float]:
    """``pid``'s children and the CPU seconds each has used."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _spinning(pid: int) -> list[int]:
    """``pid``'s children that used a tenth of a CPU or more over the next second (a
    spinning program gets that much beside any other work this machine does)."""
    before = _children(pid)
    time.sleep(1)
    after = _children(pid)
    return [child for child in after if after[child] - before.get(child, after[child]) > 0.1]


def test_a_framed_client_that_does_not_read_still_has_its_programs_stopped_on_time() -> None:
    # Cold: its engine workers are then this process's children, for ``_spinning``.
    proc = subprocess.Popen(
        [INTERPRETER, "code-mode-host", "--timeout", str(LIMIT_S)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
        env={**os.environ, "CODEMODE_WARM": "0"},
    )  # fmt: skip
    peer = RawPeer(proc)
    try:
        peer.open([], session="spin")
        peer.request(2, {"method": "session/open", "sessionId": "big"})
        assert peer.read()["result"]["status"] == "ok"
        peer.execute(3, "while (true) {}", session="spin")
        started = peer.read()  # (its time limit counts from now)
        assert started["result"]["value"]["type"] == "execution/started", started
        # An answer far larger than the pipe holds, which this client does not read, while
        # the spinning program's limit passes: its worker must be stopped on time anyway.
        peer.execute(4, 'text("x".repeat(1 << 20));', session="big")
        time.sleep(LIMIT_S + 3)
        assert _spinning(proc.pid) == [], "a program ran on past its time limit"
        # Now it reads: both answers are there, whole.
        answers = {}
        while len(answers) < 2:
            message = peer.read(60)
            assert message is not None, answers
            if message.get("type") == "execute/initialResponse":
                answers[message["id"]] = _outcome(message)
        assert "time limit" in str(answers[3]), answers[3]
        assert _texts(answers[4]) == ["x" * (1 << 20)]
    finally:
        proc.kill()
        proc.wait(10)


def test_what_a_framed_client_was_answered_still_reaches_it_after_its_input_ends() -> None:
    """A client that sends its requests and closes its end before it reads (a script
    piping frames in) still gets every answer whole, the one the pipe could not hold
    when its input ended too (100 kB: more than the pipe holds, less than what makes
    the host stop reading its client, so the end of its input is read at once)."""
    proc = subprocess.Popen(
        [INTERPRETER, "code-mode-host"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
    )  # fmt: skip
    peer = RawPeer(proc)
    try:
        peer.open([])
        peer.execute(2, f'text("x".repeat({ANSWER}));')
        started = peer.read()
        assert started["result"]["value"]["type"] == "execution/started", started
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while _unread(proc.stdout.fileno()) < 60_000:  # the answer fills the pipe
            assert time.monotonic() < deadline, "the program never answered"
            time.sleep(0.02)
        assert proc.stdin is not None
        proc.stdin.close()  # the rest of the answer is still the host's to write
        time.sleep(2)  # and the host has ended its sessions before this reads
        message = peer.read(60)
        assert message is not None and message["type"] == "execute/initialResponse"
        assert _texts(_outcome(message)) == ["x" * ANSWER]
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` reads."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_a_terminal_as_stdout_is_left_blocking_for_the_shell_after_the_host() -> None:
    """Writing a terminal through the loop would set it non-blocking for good (the flag is
    shared by every process on that terminal): the host writes a terminal directly."""
    import pty

    main, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [INTERPRETER, "code-mode-host"], stdin=subprocess.PIPE, stdout=terminal,
            stderr=subprocess.DEVNULL, env={**os.environ, "CODEMODE_WARM": "0"},
        )  # fmt: skip
        hello = json.dumps(
            {"type": "connection/hello", "supportedVersions": [1],
             "requiredCapabilities": [], "optionalCapabilities": []}
        ).encode()  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(struct.pack("<I", len(hello)) + hello)
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        seen = b""
        while b"connection/ready" not in seen:  # it answered on the terminal
            assert time.monotonic() < deadline, seen
            if select.select([main], [], [], 1)[0]:
                seen += os.read(main, 4096)
        assert os.get_blocking(terminal)
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert os.get_blocking(terminal)
    finally:
        os.close(main)
        os.close(terminal)


def test_a_terminal_as_stdin_is_left_blocking_too() -> None:
    """The same for a terminal the host reads its requests from (frames typed through a
    terminal in raw mode, as a program driving a pty would send them)."""
    import pty
    import tty

    main, terminal = pty.openpty()
    tty.setraw(terminal)
    try:
        proc = subprocess.Popen(
            [INTERPRETER, "code-mode-host"], stdin=terminal, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={**os.environ, "CODEMODE_WARM": "0"},
        )  # fmt: skip
        peer = RawPeer(proc)
        hello = json.dumps(
            {"type": "connection/hello", "supportedVersions": [1],
             "requiredCapabilities": [], "optionalCapabilities": []}
        ).encode()  # fmt: skip
        os.write(main, struct.pack("<I", len(hello)) + hello)
        ready = peer.read(60)
        assert ready is not None and ready["type"] == "connection/ready", ready
        assert os.get_blocking(terminal)
    finally:
        os.close(main)  # the terminal hangs up: the host's input ends
        assert proc.wait(30) == 0
        assert os.get_blocking(terminal)
        os.close(terminal)
