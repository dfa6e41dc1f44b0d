"""The discount is a percentage, and the test passes."""

import subprocess
import sys
from pathlib import Path


def verify(root: Path) -> None:
    assert "percent / 100" in (root / "shop" / "pricing.py").read_text()
    run = subprocess.run([sys.executable, "tests/test_cart.py"], cwd=root,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
