"""Helpers for agent tests: run the real CLI against the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WIRES = ["chat", "responses", "anthropic"]
INTERPRETER = Path(sys.executable).parent / "interpreter"


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def provider_flags(base_url: str, wire: str, model: str = "test-model") -> list[str]:
    return [
        "-c",
        "model_provider=scripted",
        "-c",
        f"model_providers.scripted.base_url={base_url}",
        "-c",
        f"model_providers.scripted.wire_api={wire}",
        "--model",
        model,
    ]


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["CODEMODE_HOME"] = str(home)
    env.update(extra)
    return env


def run_cli(
    args: list[str], *, home: Path, cwd: Path, stdin: str = "", timeout: float = 60, **env: str
) -> CliRun:
    proc = subprocess.run(
        [str(INTERPRETER), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(home, **env),
        timeout=timeout,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def session_files(home: Path) -> list[Path]:
    return sorted((home / "sessions").glob("*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def call(name: str, args: Any, **kw: Any) -> dict[str, Any]:
    """A scripted tool call (see ScriptedToolCall)."""
    return {"name": name, "arguments": args, **kw}
