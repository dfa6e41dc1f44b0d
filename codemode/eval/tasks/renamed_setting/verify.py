"""No module reads max_items, and the test passes."""

import subprocess
import sys
from pathlib import Path


def verify(root: Path) -> None:
    for path in (root / "app").glob("*.py"):
        assert "max_items" not in path.read_text(), path
    run = subprocess.run([sys.executable, "tests/test_app.py"], cwd=root,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
