"""The import contracts in pyproject.toml (``lint-imports``) hold, and would catch a new
cycle or an upward import: each case copies the package, adds one import and expects
the linter to fail on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
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
    for package in ("codemode", "codemode_testkit"):
        shutil.copytree(ROOT / package, tmp_path / package,
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


def test_a_cycle_through_type_only_imports_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # The slash commands see the app through tui/protocols.py's App; naming the app
    # itself, even only for annotations, closes a cycle (the app imports the commands).
    _add(root / "codemode/tui/commands.py",
         "\n\nif TYPE_CHECKING:\n    from codemode.tui.app import InteractiveApp  # noqa: F401\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "No cycles are allowed in codemode.tui" in done.stdout
    assert ".commands -> .app" in done.stdout


def test_a_cycle_in_the_test_kit_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # The wire encoders read the script's data from replies.py, a leaf; reaching for
    # the script itself would close a cycle (the script renders through them).
    back = "from codemode_testkit.scripted.script import ScriptedModel  # noqa: F401"
    _add(root / "codemode_testkit/scripted/chat.py", f"\n\nif TYPE_CHECKING:\n    {back}\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "No cycles are allowed in codemode_testkit.scripted" in done.stdout


def test_a_cycle_through_a_package_init_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # The store's seam (the package) names the change records from store/changes.py;
    # naming anything of commit.py, which imports the seam back, closes a cycle that
    # acyclic_siblings cannot see (a package is no sibling of its modules).
    back = "from codemode.tools.store.commit import CommitFailed  # noqa: F401"
    _add(root / "codemode/tools/store/__init__.py", f"\n\nif TYPE_CHECKING:\n    {back}\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "A cycle between modules" in done.stdout
    assert "codemode.tools.store -> codemode.tools.store.commit -> codemode.tools.store" in (
        done.stdout
    )


def test_click_below_the_command_line_fails(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # The modes the sandbox resolves are plain values; a usage error is the CLI's to make.
    lazy = "import click  # noqa: F401  # lazy: test"
    _add(root / "codemode/sandbox/modes.py", f"\n\ndef _usage() -> None:\n    {lazy}\n")
    done = _lint(root)
    assert done.returncode != 0
    assert "codemode.sandbox is not allowed to import click" in done.stdout


def test_the_click_contract_covers_every_package_but_cli() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = settings["tool"]["importlinter"]["contracts"]
    (click,) = [c for c in contracts if c["id"] == "click"]
    assert click["forbidden_modules"] == ["click"]
    top = {p.stem for p in (ROOT / "codemode").glob("*.py") if p.name != "__init__.py"}
    top |= {p.parent.name for p in (ROOT / "codemode").glob("*/__init__.py")}
    # A new package would otherwise be free to import click without anyone noticing.
    # (`launch`, the console scripts' entry, sits above the command line: it runs it.)
    assert set(click["source_modules"]) == {
        f"codemode.{name}" for name in top - {"cli", "launch"}
    }


@pytest.mark.parametrize(
    ("module", "line", "message"),
    [
        # What a model is offered is a tool term (codemode.tool_terms.spec).
        ("surfaces.py", "from codemode.providers.base import ToolSpec",
         "codemode.tools is not allowed to import codemode.providers"),
        # Cutting output in the middle is a tool term too (codemode.tool_terms.elide).
        ("shell.py", "from codemode.js_runtime import output",
         "codemode.tools is not allowed to import codemode.js_runtime"),
    ],
)  # fmt: skip
def test_the_tools_importing_a_provider_or_the_runtime_fails(
    tmp_path: Path, module: str, line: str, message: str
) -> None:
    root = _copy(tmp_path)
    _add(root / "codemode/tools" / module, f"\n\ndef _up() -> None:\n    {line}  # noqa: F401\n")
    done = _lint(root)
    assert done.returncode != 0
    assert message in done.stdout
