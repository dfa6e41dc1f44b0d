import unittest

from textstats import average_word_length, top_words, word_count


class WordCountTest(unittest.TestCase):
    def test_counts_words(self):
        self.assertEqual(word_count("The cat sat on the mat."), 6)

    def test_empty_text(self):
        self.assertEqual(word_count(""), 0)


class AverageWordLengthTest(unittest.TestCase):
    def test_average(self):
        self.assertAlmostEqual(average_word_length("ab abcd"), 3.0)

    def test_text_without_words_is_zero(self):
        self.assertEqual(average_word_length("... !!!"), 0.0)


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])


if __name__ == "__main__":
    unittest.main()
