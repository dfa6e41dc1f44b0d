"""Test support for codemode, kept out of the product package (the wheel ships
``codemode`` only): the scripted model server, the one stand-in for a model service,
used by the test suite, the benchmarks and the recorded demo; the local llama.cpp
server the local-model tests wait for (``local_model``) and a relay in front of it that
scripts its first replies (``relay``); and a worker that tries what
its confinement forbids (``worker_probe``).

Importable from a checkout: ``scripts/setup.sh`` installs codemode editable
(``editable_mode=compat``), which puts the repository root on ``sys.path`` for every
process of that venv (tests, their subprocesses, ``python benchmarks/X.py``,
``python -m codemode_testkit.scripted_server``); pytest also adds the root itself
(``pythonpath`` in pyproject.toml).

Import it from ``codemode_testkit.scripted_server`` (its parts, and the in-process
transport, are in ``codemode_testkit.scripted``); this package stays empty so that
``python -m codemode_testkit.scripted_server`` runs without a double import.
"""
