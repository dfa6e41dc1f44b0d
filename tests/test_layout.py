"""The package layout docs/layers.md states: the package root holds the public API and
nothing else loose, the test kit beside the package is not shipped with it, no module
grows past 400 lines, and the pages that draw the layout (layout.md, layers.md,
ARCHITECTURE.md, DESIGN.md) name what the code has."""

from __future__ import annotations

import re
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


# Modules allowed past the limit while a split is under way, each leaving the list when
# it lands (none now). Nothing else may pass the limit.
OVER_THE_LIMIT: set[str] = set()
MAX_LINES = 400


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _too_long(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): _lines(p)
        for package in ("codemode", "codemode_testkit")
        for p in (root / package).rglob("*.py")
        if "__pycache__" not in p.parts and _lines(p) > MAX_LINES
    }


def test_no_module_is_over_400_lines() -> None:
    too_long = _too_long(ROOT)
    unexpected = {name: n for name, n in too_long.items() if name not in OVER_THE_LIMIT}
    assert not unexpected, f"split by concept (docs/layers.md): {unexpected}"
    # A file that got under the limit leaves the list, so the list cannot hide a new one.
    assert set(too_long) == {name for name in OVER_THE_LIMIT if (ROOT / name).exists()}


def test_a_module_over_400_lines_is_found(tmp_path: Path) -> None:
    deep = tmp_path / "codemode/tools/store"
    deep.mkdir(parents=True)
    (deep / "big.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (deep / "fits.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert _too_long(tmp_path) == {"codemode/tools/store/big.py": MAX_LINES + 1}


def _top_level() -> set[str]:
    """The packages directly under codemode/, and its loose modules but __init__."""
    found = {p.parent.name for p in (ROOT / "codemode").glob("*/__init__.py")}
    return found | {p.stem for p in (ROOT / "codemode").glob("*.py") if p.stem != "__init__"}


def _layers() -> list[set[str]]:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c for c in settings["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return [{name.strip() for name in line.split("|")} for line in layers["layers"]]


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading``, header and rule left out."""
    lines = text.split(heading, 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[2:]


def _named(cell: str) -> set[str]:
    """The names a table cell gives in backticks, leaving out what parentheses add
    (``commands`` (``exec``, ``run``) names commands) and a trailing slash or .py."""
    bare = re.sub(r"\([^)]*\)", "", cell.split(":", 1)[0])
    return {re.sub(r"(/|\.py)$", "", name) for name in re.findall(r"`([^`]+)`", bare)}


def test_layers_md_lists_the_layers_pyproject_states() -> None:
    rows = _table_rows(_page("layers.md"), "## Layers")
    assert [_named(row[1]) for row in rows] == _layers()


def test_architecture_md_places_every_package() -> None:
    rows = _table_rows(_page("ARCHITECTURE.md"), "## The layers")
    placed = set().union(*(_named(row[1]) for row in rows))
    assert placed == _top_level() - {"__init__"}


def test_layout_md_and_design_md_name_every_package() -> None:
    layout = _page("layout.md")
    design = _page("DESIGN.md").split("## Layout", 1)[1].split("```")[1]
    for name in sorted(_top_level() - {"version"}):
        assert f"`{name}/`" in layout, f"docs/layout.md does not place {name}/"
        assert f"{name}/" in design, f"docs/DESIGN.md's layout does not show {name}/"
    # Cells are the runtime's, not the agent's.
    assert (ROOT / "codemode/js_runtime/cells.py").is_file()
    assert "`js_runtime/cells.py`" in layout


def _requirement_names(requirements: list[str]) -> set[str]:
    names = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in requirements}
    return {n for n in names if n != "codemode"}


def test_design_md_says_why_for_every_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    shipped = _requirement_names(project["dependencies"])
    for extra in ("v8", "mcp", "agent", "ray"):
        shipped |= _requirement_names(extras[extra])
    rows = _table_rows(_page("DESIGN.md"), "## Dependencies, and why")
    named = set().union(*(set(re.findall(r"`([^`]+)`", row[1])) for row in rows))
    # Every library codemode installs, and the well-known ones it chose not to use.
    considered = {"h2", "protobuf", "grpcio", "grpclib"}
    missing = (shipped | considered) - named
    assert not missing, f"docs/DESIGN.md's dependency table leaves out {sorted(missing)}"
    assert all(row[2].strip() for row in rows), "a dependency without its why"


def test_the_codex_host_is_split_by_concept_and_layout_md_names_each_part() -> None:
    """``codex_host/`` holds subpackages only (the wire, each protocol, the session, how it
    is served, the warm server), and docs/layout.md names each one with its modules."""
    package = ROOT / "codemode" / "codex_host"
    loose = sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules loose in codex_host/: {loose}"
    layout = _page("layout.md")
    parts = sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())
    assert len(parts) >= 5
    for part in parts:
        assert f"`codex_host/{part}/`" in layout, (
            f"docs/layout.md does not place codex_host/{part}/"
        )
        for module in sorted((package / part).glob("*.py")):
            if module.name != "__init__.py":
                assert f"`{module.name}`" in layout, (
                    f"docs/layout.md leaves out {part}/{module.name}"
                )
