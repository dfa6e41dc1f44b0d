"""The set-up writes bytecode for what a command imports, the libraries imported on first
use included (scripts/setup-runtime.sh, ``launch.serve.import_everything``): where
PYTHONDONTWRITEBYTECODE is set, whatever it leaves out is compiled again at every start
(httpx, httpcore and anyio alone: ~350 ms before a cold session's first request)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SETUP = Path(__file__).parent.parent / "scripts" / "setup-runtime.sh"

# What a cold command imports only once it runs: the model client's libraries (the
# interactive session's first request), the terminal's, and codemode's own modules.
FIRST_USE = (
    "httpx._client", "httpcore._async.connection_pool", "anyio._backends._asyncio",
    "httpx_sse", "prompt_toolkit.application.application", "rich.console",
    "codemode.tui.app", "codemode.providers.transport",
)  # fmt: skip


def _setup_step() -> str:
    """The Python the set-up runs with bytecode writing on, as the script has it."""
    text = SETUP.read_text()
    step = r"env -u PYTHONDONTWRITEBYTECODE \.venv/bin/python -c '\n(.*?)\n'"
    found = re.search(step, text, re.S)
    assert found, "scripts/setup-runtime.sh no longer writes bytecode ahead"
    return found.group(1)


def test_the_set_up_compiles_the_libraries_commands_import_on_first_use(tmp_path: Path) -> None:
    # A cache folder of the test's own: every module is compiled there afresh.
    prefix = tmp_path / "bytecode"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    check = f"""
import importlib.util, json, os
found = {{}}
for name in {FIRST_USE!r}:
    cached = importlib.util.cache_from_source(importlib.util.find_spec(name).origin)
    found[name] = cached.startswith({str(prefix)!r}) and os.path.exists(cached)
print(json.dumps(found))
"""
    done = subprocess.run(
        [sys.executable, "-c", _setup_step() + "\n" + check], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == dict.fromkeys(FIRST_USE, True)
