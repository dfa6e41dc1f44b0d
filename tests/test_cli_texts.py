"""What `--help`, `harness list` and `tools` say agrees with what the program does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click

INTERPRETER = Path(sys.executable).parent / "interpreter"


def interp(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEMODE_HOME": str(home), "HOME": str(home)}
    return subprocess.run(
        [str(INTERPRETER), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def _option_help(command: str, name: str) -> str:
    from codemode.cli.root import cli

    cmd = cli.get_command(click.Context(cli), command)
    assert cmd is not None, command
    for param in cmd.params:
        if isinstance(param, click.Option) and param.name == name:
            return " ".join((param.help or "").split())
    raise KeyError(name)


def test_harness_help_names_every_family_default() -> None:
    """`--harness`'s help lists the default of each model family the code knows
    (it once left GLM -> zcode out)."""
    from codemode.harnesses.catalog import DEFAULT_HARNESS, FAMILY_DEFAULTS

    for command in ("exec", "resume"):
        text = _option_help(command, "harness").lower()
        for family, harness in FAMILY_DEFAULTS.items():
            assert f"{harness} for {family}" in text, (command, family, text)
        assert f"else {DEFAULT_HARNESS}" in text


def test_dialect_help_names_the_default_dialect() -> None:
    """`--code-mode/--classic` says which dialect a session has when neither is given."""
    from codemode.config import Config

    default = "code mode" if Config.model_fields["code_mode"].default else "classic"
    for command in ("exec", "resume"):
        assert f"else {default}." in _option_help(command, "code_mode"), command


def test_harness_list_names_the_tools_native_offers(tmp_path: Path) -> None:
    """native's line in `harness list` names exactly the function tools a native
    classic session sends (it once left apply_patch out)."""
    home = tmp_path / "home"
    home.mkdir()
    listed = interp("harness", "list", cwd=tmp_path, home=home)
    assert listed.returncode == 0, listed.stderr
    native = next(line for line in listed.stdout.splitlines() if line.startswith("native "))
    named = re.search(r"\(([^)]*)\)\s*$", native)
    assert named, native
    sent = interp("tools", "--json", "--harness", "native", "--classic", cwd=tmp_path, home=home)
    assert sent.returncode == 0, sent.stderr
    assert named[1].split(", ") == [tool["name"] for tool in json.loads(sent.stdout)]


def test_run_help_states_no_timing_and_the_interrupted_status(tmp_path: Path) -> None:
    """Timings are measured (docs/figures.md), never written into help texts; the
    exit statuses include Ctrl-C's."""
    from codemode.cli import EXIT_INTERRUPTED

    shown = interp("run", "--help", cwd=tmp_path, home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert not re.search(r"\d\s*(ms|µs|us)\b", text), text
    assert f"{EXIT_INTERRUPTED} interrupted" in text
