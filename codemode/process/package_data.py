"""Reading a data file shipped beside a module (``.js``, ``.proto``, tables).

``importlib.resources`` would do it too, but importing it brings ``pathlib``,
``tempfile``, ``zipfile`` and ``shutil`` (about a tenth of the code-mode host's start,
which Codex waits for); codemode is installed as plain files, so the file beside the
module is opened directly.
"""

from __future__ import annotations

import os


def read_text(module_file: str, name: str) -> str:
    """The UTF-8 text of ``name`` in the folder of ``module_file`` (a ``__file__``)."""
    with open(os.path.join(os.path.dirname(module_file), name), encoding="utf-8") as f:
        return f.read()
