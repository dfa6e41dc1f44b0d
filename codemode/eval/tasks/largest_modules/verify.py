"""LARGEST.txt names the three longest modules, longest first."""

from pathlib import Path


def verify(root: Path) -> None:
    expected = "mods/mod_8.py\nmods/mod_7.py\nmods/mod_6.py\n"
    assert (root / "LARGEST.txt").read_text() == expected
