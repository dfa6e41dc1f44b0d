"""Whatever goes wrong inside a command, `interpreter` prints one line, never a Python
traceback: a click error its message with its own exit status, an unexpected exception
`interpreter: internal error: ... (see LOG)` with the traceback kept in that log under
$CODEMODE_HOME/logs. The failing commands are registered on the real `cli` group in a
real process; `codemode.cli.main` is what handles them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from codemode.cli import INTERNAL_ERROR_STATUS

PROGRAM = """
import sys, click
from codemode import cli

@cli.cli.command("boom")
def boom():
    def deeper():
        raise RuntimeError("kaboom: the \\x1b[31munexpected\\nsecond line")
    deeper()

@cli.cli.command("thread-boom")
def thread_boom():
    import threading
    def work():
        raise ValueError("lost in a thread")
    t = threading.Thread(target=work)
    t.start()
    t.join()
    print("main went on")

@cli.cli.command("click-error")
def click_error():
    e = click.ClickException("the thing failed")
    e.exit_code = 5
    raise e

@cli.cli.command("file-error")
def file_error():
    raise click.FileError("/nowhere/x", hint="no such folder")

cli.main(sys.argv[1:])
"""


def interpreter(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEMODE_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, env=env,
        timeout=60,
    )


def test_an_unexpected_exception_is_one_line_and_a_log_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = interpreter(home, "boom")
    assert run.returncode == INTERNAL_ERROR_STATUS, run.stderr
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    assert "\x1b" not in run.stderr  # the escape sequence in the message is shown escaped
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    m = re.fullmatch(
        r"interpreter: internal error: RuntimeError: kaboom: the \\x1b\[31munexpected \.\.\. "
        r"\(see (?P<log>.+)\)",
        lines[0],
    )
    assert m, lines[0]
    log = Path(m["log"])
    assert log.parent == home / "logs"
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in deeper" in text
    assert "second line" in text and "interpreter boom" in text


def test_a_broken_home_still_gets_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = interpreter(blocker / "home", "boom")  # the logs folder cannot be made
    assert run.returncode == INTERNAL_ERROR_STATUS
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("interpreter: internal error: RuntimeError: kaboom")
    where = line.rsplit("(see ", 1)[1].rstrip(")")
    assert "Traceback" in Path(where).read_text()  # kept in the temporary folder instead
    Path(where).unlink()


def test_click_exceptions_are_their_message_and_exit_status(tmp_path: Path) -> None:
    run = interpreter(tmp_path, "click-error")
    assert (run.returncode, run.stderr) == (5, "interpreter: error: the thing failed\n")
    run = interpreter(tmp_path, "file-error")
    assert run.returncode == 1
    assert run.stderr.startswith("interpreter: error: Could not open file")
    assert "no such folder" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "logs").exists()  # an expected error is not a crash


def test_an_exception_in_a_thread_is_one_line_and_a_log_file(tmp_path: Path) -> None:
    run = interpreter(tmp_path, "thread-boom")
    assert run.returncode == 0 and run.stdout == "main went on\n"
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(
        "interpreter: internal error in a thread: ValueError: lost in a thread (see "
    ), line
    log = Path(line.rsplit("(see ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path / "logs" and "in work" in log.read_text()


# `interpreter code-mode-host` is served without click (``codemode.launch.host``): a bug
# in the host is still one line and a log file.
HOST_PROGRAM = """
from codemode.codex_host.serve import server

async def serve(*args, **kwargs):
    raise RuntimeError("kaboom in the host")

server.serve = serve  # (a bug, wherever it is: the host's serve raises)
from codemode.launch.host import serve_host
serve_host(["code-mode-host", "--listen", "grpc+stdio://"])
"""


def test_a_bug_in_the_code_mode_host_served_without_click_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-c", HOST_PROGRAM], capture_output=True, text=True, env=env,
        stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert run.returncode == INTERNAL_ERROR_STATUS, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("interpreter: internal error: RuntimeError: kaboom in the host"), line
    log = Path(line.rsplit("(see ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path / "home" / "logs"
    assert "interpreter code-mode-host --listen grpc+stdio://" in log.read_text()
