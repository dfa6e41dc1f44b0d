"""add() adds."""

from pathlib import Path


def verify(root: Path) -> None:
    assert "return a + b" in (root / "calc.py").read_text()
