"""The root group's commands are imported on first use (``codemode.cli.root``): the
table of which module registers which command must stay true, and a command must not
pay for the others' imports."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import codemode.cli
from codemode.cli.root import COMMAND_MODULES, cli, load_command_modules


def test_the_table_names_every_command_and_the_module_that_registers_it() -> None:
    # Every module of the package (where a new command would be), imported; not
    # ``__main__``, which runs the command line.
    for info in pkgutil.iter_modules(codemode.cli.__path__):
        if info.name != "__main__":
            __import__(f"codemode.cli.{info.name}")
    load_command_modules()
    registered = {
        name: command.callback.__module__
        for name, command in cli.commands.items()
        if command.callback is not None
    }
    assert set(cli.commands) == set(COMMAND_MODULES)
    assert registered == {n: f"codemode.cli.{m}" for n, m in COMMAND_MODULES.items()}


def _modules_after(args: list[str], tmp_path: Path) -> set[str]:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from codemode.cli import cli\n"
        f"result = CliRunner().invoke(cli, {args!r})\n"
        "assert result.exit_code == 0, result.output\n"
        "print(' '.join(m for m in sys.modules if m.startswith('codemode.cli.')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_a_command_imports_its_own_module_only(tmp_path: Path) -> None:
    loaded = _modules_after(["run", "--help"], tmp_path)
    assert "codemode.cli.run" in loaded
    others = {f"codemode.cli.{m}" for m in COMMAND_MODULES.values()} - {"codemode.cli.run"}
    assert not loaded & others, sorted(loaded & others)


def test_help_lists_every_command(tmp_path: Path) -> None:
    code = (
        "from click.testing import CliRunner\n"
        "from codemode.cli import cli\n"
        "print(CliRunner().invoke(cli, ['--help']).output)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    listed = proc.stdout.split("Commands:", 1)[1].split()
    for name in COMMAND_MODULES:
        assert name in listed, (name, proc.stdout)
