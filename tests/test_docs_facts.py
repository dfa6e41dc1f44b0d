"""What README.md and docs/ state as defaults, caps, limits and exit statuses is what the
code does (``tests/doc_facts.py`` says how facts are marked and read)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.doc_facts import FACTS, render

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!--fact:([a-z0-9_.]+)-->(.*?)<!--/fact-->", re.S)


def pages() -> dict[str, str]:
    found = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for page in sorted((ROOT / "docs").glob("*.md")):
        found[f"docs/{page.name}"] = page.read_text(encoding="utf-8")
    return found


def marked(text: str) -> list[tuple[str, str]]:
    """(name, value) for every fact marked in ``text``."""
    return [(m[1], m[2].strip().strip("`")) for m in MARK.finditer(text)]


def problems(name: str, text: str) -> list[str]:
    """What page ``name`` (its ``text``) states that the code contradicts."""
    found = []
    for fact, value in marked(text):
        if fact not in FACTS:
            found.append(f"{name}: unknown fact {fact!r} (add it to tests/doc_facts.py)")
            continue
        code = FACTS[fact]()
        if value not in render(code):
            found.append(f"{name}: says {fact} is {value!r}; the code says {code!r}")
    return found


def test_every_documented_fact_is_the_code_s() -> None:
    found = [p for name, text in pages().items() for p in problems(name, text)]
    assert not found, "\n".join(found)


def test_every_fact_the_code_knows_is_documented() -> None:
    documented = {fact for text in pages().values() for fact, _ in marked(text)}
    missing = sorted(set(FACTS) - documented)
    assert not missing, f"facts no page states: {missing}"


def test_a_page_that_drifted_is_caught() -> None:
    """The check itself: a wrong value, an unknown name, and a right value in each of
    the ways a number may be written."""
    fact = "codex_host.timeout_s"
    value = FACTS[fact]()
    wrong = f"x <!--fact:{fact}-->{value + 1}<!--/fact--> <!--fact:no.such-->1<!--/fact-->"
    assert len(problems("page", wrong)) == 2
    right = "".join(f"<!--fact:{fact}-->{shown}<!--/fact-->" for shown in render(value))
    assert problems("page", right) == []
