"""TODO.md lists every TODO under src/, by file and line, in file order."""

from pathlib import Path


def report(root: Path) -> str:
    lines = []
    for path in sorted((root / "src").glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "TODO" in line:
                item = line.split("TODO:")[1].strip()
                lines.append(f"- {path.relative_to(root).as_posix()}:{n}: {item}")
    return "# TODOs\n\n" + "\n".join(lines) + "\n"


def verify(root: Path) -> None:
    assert (root / "TODO.md").read_text() == report(root)
