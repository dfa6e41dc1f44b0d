"""pyseccomp, imported without running ``ldconfig``.

pyseccomp looks up libc and libseccomp with ``ctypes.util.find_library``, which runs
``/sbin/ldconfig -p`` in a subprocess each time: two processes forked from a large
interpreter, and ``ctypes.util`` itself imported, at the start of every session that
builds a seccomp filter. In codemode's own processes (``entry.claimed()``: the
`interpreter` command, the engine worker), a stand-in ``ctypes.util`` answers the two
sonames it asks for (when they load) while pyseccomp imports; any other name, or one
that does not load, goes to the real ``find_library``. In an embedder's process pyseccomp
is imported as it is: swapping a module there, even for a moment, could be seen by the
embedder's other threads. Used by the sandbox and by the engine worker's own confinement
(``js_runtime.worker_confine``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from codemode.process import entry

_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}


def import_pyseccomp() -> Any:
    """The pyseccomp module (ImportError or OSError where it cannot be loaded)."""
    if "pyseccomp" in sys.modules:
        return sys.modules["pyseccomp"]
    if not entry.claimed():
        return importlib.import_module("pyseccomp")
    import ctypes

    saved = (sys.modules.get("ctypes.util"), vars(ctypes).get("util"))

    def find_library(name: str) -> str | None:
        soname = _SONAMES.get(name)
        if soname is not None:
            try:
                ctypes.CDLL(soname)
                return soname
            except OSError:
                pass
        _put_back(saved)
        real = importlib.import_module("ctypes.util")
        found: str | None = real.find_library(name)
        return found

    stand_in = types.ModuleType("ctypes.util")
    stand_in.find_library = find_library  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = stand_in
    ctypes.util = stand_in  # type: ignore[attr-defined]
    try:
        return importlib.import_module("pyseccomp")
    finally:
        _put_back(saved)


def _put_back(saved: tuple[Any, Any]) -> None:
    import ctypes

    module, attribute = saved
    if module is None:
        sys.modules.pop("ctypes.util", None)
    else:
        sys.modules["ctypes.util"] = module
    if attribute is None:
        vars(ctypes).pop("util", None)
    else:
        ctypes.util = attribute  # type: ignore[attr-defined]
