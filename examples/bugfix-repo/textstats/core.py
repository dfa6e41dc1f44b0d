"""Counting words in plain text."""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[A-Za-z']+")


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased."""
    return [w.lower() for w in _WORD.findall(text)]


def word_count(text: str) -> int:
    """How many words ``text`` has."""
    return len(words(text))


def average_word_length(text: str) -> float:
    """Mean length of the words in ``text``; 0.0 for text without words."""
    found = words(text)
    return sum(len(w) for w in found) / len(found)


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` most frequent words, most frequent first."""
    return Counter(words(text)).most_common(n)
