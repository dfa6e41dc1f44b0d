"""Every manifest says 1.5.0 and none says 1.4.2."""

from pathlib import Path

MANIFESTS = ("package.json", "pyproject.toml", "Cargo.toml", "setup.cfg", "VERSION")


def verify(root: Path) -> None:
    for name in MANIFESTS:
        text = (root / name).read_text()
        assert "1.5.0" in text and "1.4.2" not in text, name
