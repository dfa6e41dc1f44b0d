def a():
    """Docstring."""
    return 1
