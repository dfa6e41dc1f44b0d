"""fetch_data is gone everywhere and lib/util.py defines load_data."""

from pathlib import Path


def verify(root: Path) -> None:
    for path in root.rglob("*.py"):
        assert "fetch_data" not in path.read_text(), path
    assert "def load_data(" in (root / "lib/util.py").read_text()
