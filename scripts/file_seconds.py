"""Write tests/file_seconds.json, each test file's wall time, from a run's JUnit report:

    bash scripts/test.sh --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/file_seconds.py /tmp/suite.xml

tests/xdist_order.py hands the longest files to the workers first, so that they finish
together. Worth running again when files are added or become much slower."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "tests" / "file_seconds.json"


def per_file(report: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        # classname: "tests.test_foo" or "tests.test_foo.TestClass"; junit's "file"
        # attribute is not always written
        parts = case.get("classname", "").split(".")
        while parts and not (TABLE.parents[1] / Path(*parts)).with_suffix(".py").is_file():
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return dict(seconds)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/file_seconds.py JUNIT_XML")
    seconds = per_file(Path(sys.argv[1]))
    if not seconds:
        sys.exit(f"no test cases in {sys.argv[1]}")
    table = {
        "about": "each test file's wall time (s) in one run of scripts/test.sh, written by "
                 "scripts/file_seconds.py; tests/xdist_order.py starts the longest first",
        "seconds": {name: round(s, 1)
                    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])},
    }
    TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{len(seconds)} files, {sum(seconds.values()):.0f} s in all -> {TABLE}")


if __name__ == "__main__":
    main()
