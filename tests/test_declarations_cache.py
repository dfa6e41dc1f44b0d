"""The built-in tools' TypeScript declarations kept in codemode's cache between starts
(``tools.declarations_cache``): the same text as written afresh, read back while nothing
they are made from changed, written again when something did, never used for a registry
holding other tools."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.tools import builtin_registry, declarations_cache
from codemode.tools.typescript import _declarations, typescript_declarations


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEMODE_CACHE", str(tmp_path))
    return tmp_path / "declarations"


def held(cache: Path) -> dict[str, str]:
    (path,) = cache.iterdir()
    data: dict[str, str] = json.loads(path.read_text())
    return data


def test_the_kept_text_is_what_is_written_afresh(cache: Path) -> None:
    first = typescript_declarations(builtin_registry())
    assert first == _declarations(builtin_registry(), standalone=False, argv=None, brief=False)
    assert held(cache)["text"] == first
    # Read back: a changed text in the file (same key) is what the next start gets.
    path = next(cache.iterdir())
    path.write_text(json.dumps({**held(cache), "text": "kept"}))
    assert typescript_declarations(builtin_registry()) == "kept"
    # Each set of options has its own file.
    brief = typescript_declarations(builtin_registry(), brief=True)
    assert brief == _declarations(builtin_registry(), standalone=False, argv=None, brief=True)
    assert len(list(cache.iterdir())) == 2


def test_a_changed_tool_file_or_a_broken_file_is_written_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key's files: a copy of codemode/tools, so that one can be changed.
    copy = tmp_path / "tools"
    shutil.copytree(Path(declarations_cache.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    monkeypatch.setattr(declarations_cache, "_TOOLS_DIR", copy)
    fresh = typescript_declarations(builtin_registry())
    path = next(cache.iterdir())
    path.write_text(json.dumps({**held(cache), "text": "stale"}))
    assert typescript_declarations(builtin_registry()) == "stale"
    (copy / "patch" / "added.py").write_text("# new\n")
    assert typescript_declarations(builtin_registry()) == fresh
    path.write_text(json.dumps({**held(cache), "text": "stale"}))
    shell = copy / "shell.py"
    st = shell.stat()
    os.utime(shell, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert typescript_declarations(builtin_registry()) == fresh
    path.write_text("{not json")
    assert typescript_declarations(builtin_registry()) == fresh
    assert held(cache)["text"] == fresh


def test_a_registry_with_other_or_loaded_tools_is_not_kept(cache: Path) -> None:
    registry = builtin_registry()

    @registry.tool
    async def price(item: str) -> float:
        """The price of an item."""
        return 1.0

    assert "price(args: PriceArgs): Promise<number>" in typescript_declarations(registry)
    loaded = builtin_registry()
    loaded.get("shell")
    typescript_declarations(loaded)
    assert not cache.exists()


def test_an_exec_start_loads_no_tool_module_once_kept(cache: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from codemode.tools import builtin_registry\n"
        "from codemode.harnesses.native import exec_tool_spec\n"
        "spec = exec_tool_spec(builtin_registry())\n"
        "print(sorted(m for m in sys.modules if m in ('codemode.tools.apply_patch',"
        " 'codemode.tools.grep', 'codemode.tools.read_file')), len(spec.description) > 1000)\n"
    )
    env = {**os.environ, "CODEMODE_CACHE": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60) for _ in range(2)]  # fmt: skip
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[0].stdout.split()[-1] == "True"
    assert "codemode.tools.apply_patch" in runs[0].stdout  # written: every tool loaded
    assert runs[1].stdout.strip() == "[] True"  # read back: none
