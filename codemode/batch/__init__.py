"""Batch runs: one script (or one agent session) over many working copies, in parallel.

``interpreter run SCRIPT.js --repos FILE|DIR...`` and ``interpreter exec --repos ...
PROMPT`` (options in ``codemode.cli.batch_options``, the command in ``command.py``) list the
repositories (``repos.py``), filter them (``select.py``) or take them from an earlier
report (``resume.py``, against what its run recorded: ``run_record.py``), roll back in
each a write killed partway there, and turn each into a ``RepoTask`` (``models.py``). A backend — a
local process pool (``local.py``) or a Ray cluster (``ray_backend.py``, checks in
``ray_checks.py``, repositories shipped by ``shipping.py``) — runs each task in a worker
(``worker.py``; ``agent_worker.py`` for agent sessions) inside an isolated copy of the
repository (``workcopy.py``, scratch folders in ``scratch.py``), and brings back a
journal of what changed (``changes.py``, rendered by ``diff_text.py``). The driver
(``runner.py``) applies each successful journal all or nothing, publishes it with
``--branch`` (``publish.py``), shows progress (``progress.py``) and writes the report
(``report.py``). See docs/batch.md.
"""
