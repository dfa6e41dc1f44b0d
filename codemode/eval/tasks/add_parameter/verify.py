"""request() takes a timeout and all eight callers pass timeout=30."""

from pathlib import Path

CALLERS = 8


def verify(root: Path) -> None:
    assert "def request(url, timeout):" in (root / "net/client.py").read_text()
    for i in range(CALLERS):
        assert f"request('/api/{i}', timeout=30)" in (root / f"jobs/job_{i}.py").read_text()
