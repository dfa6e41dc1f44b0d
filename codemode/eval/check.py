"""A task's check, run on the workspace the model left, inside the session's sandbox.

The check (``verify.py``) reads the files the model wrote and may run them
(``find_the_bug`` runs ``tests/test_cart.py``): run in codemode's own process it would
follow a link the model planted to any file of the user's, block on a FIFO put where a
source was, or run the model's code outside the sandbox, with the user's every right.
So it runs as the model's commands did: confined by the session's sandbox (the same
policy, backend, writable roots and withheld environment), in the workspace, with a time limit,
its output bounded as a command's is. Only its verdict comes back: exit status 0, or the one line it
printed about the failure (control characters made visible).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.sandbox.protocols import Sandbox

CHECK_TIMEOUT_S = 120.0
# Run inside the sandbox: the check's source is handed over as an argument (the suite's
# folder need not be readable there), its failure printed as one line, no traceback.
_RUNNER = """\
import pathlib, sys
path, source, root = sys.argv[1:4]
sys.argv = [path]
space = {"__name__": "verify", "__file__": path}
try:
    exec(compile(source, path, "exec"), space)
    space["verify"](pathlib.Path(root))
except BaseException as exc:
    print(f"{type(exc).__name__}: {exc}"[:2000])
    sys.exit(1)
"""


async def run_check(sandbox: Sandbox, verify_file: Path, root: Path,
                    timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
    """None when the check accepts ``root``, else why not (one line)."""
    from codemode.terminal.control_chars import visible
    from codemode.tool_terms.errors import ToolError
    from codemode.tools.shell import OutputCapture, OutputReader, kill_group

    try:
        source = verify_file.read_text("utf-8")
    except OSError as exc:
        return f"cannot read the check {verify_file}: {exc.strerror or exc}"
    argv = [sys.executable, "-I", "-c", _RUNNER, str(verify_file), source, str(root)]
    read_fd, write_fd = os.pipe()
    try:
        # (the sandbox's door for commands: its policy, confinement and withheld
        # environment, as the model's own commands had them)
        proc = await sandbox.spawn(shlex.join(argv), cwd=root, env=os.environ,
                                   output_fd=write_fd, tool="eval")
    except ToolError as exc:  # refused, or no confinement here
        os.close(read_fd)
        return visible(f"the check could not run: {exc}")
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    capture = OutputCapture()
    reader = OutputReader(read_fd, capture, None)
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        kill_group(proc)  # (what it left running, or all of it at the time limit)
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), 5)
        sandbox.after_command(proc)
        await reader.drained(5)
        reader.close()
    if timed_out:
        return f"the check ran past {timeout_s:g} s and was stopped"
    if proc.returncode == 0:
        return None
    lines = [line for line in capture.text()[0].splitlines() if line.strip()]
    return visible(lines[-1][:500] if lines else f"the check exited with {proc.returncode}")
