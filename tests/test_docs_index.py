"""docs/index.md lists every page, and every link in README.md and docs/ leads somewhere:
to a file that exists and, with a ``#fragment``, to a heading (or ``<a id>``) it has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(text: str) -> set[str]:
    """The fragments a page answers to, as GitHub makes them from its headings."""
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    text = page.read_text(encoding="utf-8")
    found = []
    for target in LINK.findall(FENCE.sub("", text)):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            found.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif fragment and linked.suffix == ".md":
            if fragment not in anchors(linked.read_text(encoding="utf-8")):
                found.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return found


def test_the_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = {target.partition("#")[0] for target in LINK.findall(index)}
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert pages - listed == set(), "pages docs/index.md does not list"


def test_every_link_leads_somewhere() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    found = [problem for page in pages for problem in broken_links(page)]
    assert not found, "\n".join(found)


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope)\n"
        "```\n[in a fence](ignored.md)\n```\n"
    )
    assert broken_links(page, tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: there.md#nope (no such heading)",
    ]
