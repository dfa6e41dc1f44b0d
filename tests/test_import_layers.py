"""The import contracts in pyproject.toml (``lint-imports``) hold, and would catch a new
cycle or an upward import: each case copies the package, adds one import and expects
the linter to fail on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(
    not LINT.exists(), reason="lint-imports is not installed (bash scripts/setup.sh installs it)"
)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH first: the copy's `codemode`, not the installed one, is analysed.
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "codemode", tmp_path / "codemode",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _add(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_the_tree_keeps_every_contract() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_cycle_between_two_modules_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # words.py is below shell_parse; importing back closes a cycle (function-local
    # imports count too: hiding one in a function does not hide it from the graph).
    back = "from codemode.sandbox.execpolicy import shell_parse  # noqa: F401"
    _add(root / "codemode/sandbox/execpolicy/words.py", f"\n\ndef _back() -> None:\n    {back}\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "No cycles are allowed in codemode.sandbox.execpolicy" in done.stdout
    assert ".words -> .shell_parse" in done.stdout


def test_a_lower_layer_importing_a_higher_one_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # The sandbox may not use the tools package (the tools run inside the sandbox).
    # A `# lazy:` import is deferred, not exempt: it must respect the layers too.
    lazy = "from codemode.tools import registry  # noqa: F401  # lazy: test"
    _add(root / "codemode/sandbox/protection/paths.py", f"\n\ndef _up() -> None:\n    {lazy}\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "codemode.sandbox is not allowed to import codemode.tools" in done.stdout


def test_a_new_top_level_module_must_be_placed_in_a_layer(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "codemode/stray.py").write_text('"""Not in any layer."""\n', encoding="utf-8")
    done = _lint(root)
    assert done.returncode != 0
    assert "codemode.stray" in done.stdout
