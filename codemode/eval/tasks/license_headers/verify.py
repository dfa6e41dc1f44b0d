"""Every module under pkg/ starts with the SPDX header, exactly once."""

from pathlib import Path

HEADER = "# SPDX-License-Identifier: MIT\n"


def verify(root: Path) -> None:
    for path in (root / "pkg").glob("*.py"):
        text = path.read_text()
        assert text.startswith(HEADER) and text.count("SPDX") == 1, path
