"""The lean install next to the full one, printed as one JSON object.

    .venv/bin/python benchmarks/lean_install.py [--runs N]

Builds two fresh venvs from this tree with uv (from its cache where it can): the lean
install (`pip install codemode`) and the full one (`pip install 'codemode[agent]'`).
For each:

- ``site_packages_mb``: the size of its site-packages (what the install added, codemode
  included; hard links from uv's cache counted at full size);
- ``distributions``: how many packages it holds;
- ``import_ms``: ``from codemode import ToolHost; ToolHost`` (the embedding API, loaded
  whole) in a fresh process, median of N runs, minus ``python -c pass`` (``python_ms``)
  in the same venv; ``import_cpu_ms`` the same in CPU time (steadier on a busy machine);
- ``first_program_ms``: a fresh process that opens a ToolHost and runs one program with
  a tool call, median of N (start, import, worker, sandbox, program, exit).

``ratio`` compares full to lean. ``load_average`` says how busy the machine was.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = (
    "import asyncio\n"
    "from codemode import ToolHost\n"
    "async def main():\n"
    "    with ToolHost('.') as host:\n"
    "        r = await host.execute('return (await tools.list_dir()).entries.length')\n"
    "        assert r.ok, r.error\n"
    "asyncio.run(main())\n"
)


def _uv() -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    found = shutil.which("uv") or next(
        iter(sorted(glob.glob(f"{cache}/codemode/uv-*/bin/uv"), reverse=True)), None
    )
    if found is None:
        sys.exit("uv is needed (scripts/setup-runtime.sh fetches it)")
    return found


def _venv(root: Path, name: str, spec: str) -> Path:
    uv, venv = _uv(), root / name
    subprocess.run([uv, "venv", "-q", str(venv), "--python", sys.executable], check=True)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "-q", "--python", str(python), "--link-mode", "hardlink",
               spec]
    if subprocess.run([*install, "--offline"], capture_output=True).returncode != 0:
        subprocess.run(install, check=True)
    return python


def _size_mb(python: Path) -> float:
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    total = 0
    for dirpath, _dirs, files in os.walk(site):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return round(total / 1e6, 1)


def _distributions(python: Path) -> int:
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    return len(list(site.glob("*.dist-info")))


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU milliseconds of one process (its children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _median(argv: list[str], cwd: Path, runs: int) -> tuple[float, float]:
    _timed(argv, cwd)  # the bytecode cache, written once
    samples = [_timed(argv, cwd) for _ in range(runs)]
    return (
        statistics.median(s[0] for s in samples),
        statistics.median(s[1] for s in samples),
    )


def measure(python: Path, work: Path, runs: int) -> dict[str, float | int]:
    base_wall, base_cpu = _median([str(python), "-c", "pass"], work, runs)
    wall, cpu = _median(
        [str(python), "-c", "from codemode import ToolHost; ToolHost"], work, runs
    )
    program_wall, _ = _median([str(python), "-c", PROGRAM], work, max(3, runs // 3))
    return {
        "site_packages_mb": _size_mb(python),
        "distributions": _distributions(python),
        "python_ms": round(base_wall, 1),
        "import_ms": round(wall - base_wall, 1),
        "import_cpu_ms": round(cpu - base_cpu, 1),
        "first_program_ms": round(program_wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="codemode-lean-bench-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        (work / "a.txt").write_text("a\n")
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        lean = measure(_venv(root, "lean", str(ROOT)), work, runs)
        full = measure(_venv(root, "full", f"{ROOT}[agent]"), work, runs)
    ratio = {
        k: round(full[k] / lean[k], 2)
        for k in ("site_packages_mb", "distributions", "import_ms", "import_cpu_ms")
        if lean[k]
    }
    print(json.dumps({
        "lean": lean,
        "full": full,
        "full_over_lean": ratio,
        "runs": runs,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }, indent=2))


if __name__ == "__main__":
    main()
