"""No handler calls log.warn any more; each calls log.warning."""

from pathlib import Path


def verify(root: Path) -> None:
    for path in (root / "svc").glob("*.py"):
        text = path.read_text()
        assert "log.warning(" in text and "log.warn(" not in text, path
