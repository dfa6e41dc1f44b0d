"""The quick start's first run, printed as one JSON object.

    python3 benchmarks/first_run.py [--runs 1]

Clones this checkout (its committed state) into a temporary directory and runs
``bash scripts/demo.sh`` there, as a new user would: the runtime set-up
(``scripts/setup-runtime.sh``, no test tools) and the demo itself. Reported per run
and as medians:

- ``setup_s``: ``scripts/setup-runtime.sh`` alone in a fresh clone;
- ``demo_s``: ``scripts/demo.sh`` in another fresh clone (set-up included);
- ``venv_mb``: the size of the demo's ``.venv``.

The target is a first demo within 15 s and an environment no larger than the runtime.
Pip's wheel cache makes a difference: a machine that has never downloaded the wheels
also pays for the download.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _clone(into: Path) -> Path:
    target = into / "codemode"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def _timed(command: list[str], cwd: Path) -> float:
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - started


def _size_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 1e6


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        setup = _timed(["bash", "scripts/setup-runtime.sh"], _clone(Path(a)))
        clone = _clone(Path(b))
        demo = _timed(["bash", "scripts/demo.sh"], clone)
        return {"setup_s": setup, "demo_s": demo, "venv_mb": _size_mb(clone / ".venv")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    runs = [one_run() for _ in range(parser.parse_args().runs)]
    medians = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print(json.dumps({"runs": runs, "median": medians}, indent=2))


if __name__ == "__main__":
    main()
