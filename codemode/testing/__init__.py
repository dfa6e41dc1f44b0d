"""Test support shipped with codemode: the scripted model (the one stand-in for a model
service) used by the test suite, benchmarks and terminal tests.

Import it from ``codemode.testing.scripted_server`` (its parts, and the in-process
transport, are in ``codemode.testing.scripted``); this package stays empty so that
``python -m codemode.testing.scripted_server`` runs without a double import.
"""
