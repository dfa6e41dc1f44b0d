import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.export import export
from app.header import header
from app.listing import first_items

items = ["a", "b", "c", "d"]
assert first_items(items) == ["a", "b", "c"]
assert export(items) == "Report: a, b, c"
assert header() == "REPORT"
print("all tests passed")
