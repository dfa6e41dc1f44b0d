"""Batch runs: one script over many working copies, in parallel.

``interpreter run SCRIPT.js --repos FILE|DIR...`` (options in ``cli_options.py``, the
command in ``command.py``) lists the repositories (``repos.py``), turns each into a
``RepoTask`` (``models.py``) and runs every task in its own isolate confined to its
repository (``worker.py``) on a backend — a local process pool (``local.py``) or a Ray
cluster (``ray_backend.py``) — while ``progress.py`` shows done / failed / remaining and
``report.py`` writes one JSON line per repository. ``runner.py`` ties these together.
"""
