"""The package layout docs/layers.md states: the package root holds the public API and
nothing else loose, and the test kit beside the package is not shipped with it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
# The public API: `codemode.ToolHost` & co. (loaded on first use) and `__version__`.
PUBLIC_ROOT = {"__init__.py", "version.py"}


def test_the_package_root_holds_the_public_api_only() -> None:
    loose = {p.name for p in (ROOT / "codemode").glob("*.py")}
    assert loose == PUBLIC_ROOT, (
        f"loose at the package root: {sorted(loose - PUBLIC_ROOT)}; move each into the "
        "package of its concept (docs/layers.md)"
    )


def test_the_wheel_ships_codemode_and_not_the_test_kit() -> None:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = find["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(str(ROOT), include=include))
    assert not {p for p in shipped if p.startswith("codemode_testkit")}
    # Every package under codemode/ is shipped (the new ones of this layout included),
    # and the kit is there to be left out.
    assert {"codemode", "codemode.commands", "codemode.locations", "codemode.config"} <= shipped
    assert (ROOT / "codemode_testkit" / "__init__.py").is_file()
    # The old pattern ("codemode*") would have shipped the kit: the check above can fail.
    assert "codemode_testkit" in find_packages(str(ROOT), include=["codemode*"])
