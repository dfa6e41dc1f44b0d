"""Harnesses: a harness dresses the runtime in one model family's prompt, tool surface, dialect
(classic or code) and output parser. Filled in by the harness issue.
"""
