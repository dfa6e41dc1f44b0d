"""Small text statistics used by the codemode demo session."""

from textstats.core import average_word_length, top_words, word_count

__all__ = ["average_word_length", "top_words", "word_count"]
