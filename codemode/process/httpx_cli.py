"""Keeping ``import httpx`` from importing httpx's own command line.

``httpx/__init__.py`` runs ``from ._main import main`` (its ``httpx`` console script),
and ``httpx._main`` imports rich, pygments and click at once: about 40 ms of CPU, a
third of what ``import httpx`` costs, on every model request path, for a command line
this package never runs.

``defer()`` adds an import hook that answers for ``httpx._main`` only: the module it
makes is a stand-in whose ``main`` loads the real module when it is called, and any
other attribute read from it loads the real module too (which then replaces it in
``sys.modules`` and on the package). So ``httpx.main()`` and ``httpx._main.X`` behave
as before; only the import is put off. Nothing is imported or put in ``sys.modules``
until httpx itself is imported, and where httpx is already imported nothing changes.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

_NAME = "httpx._main"


class _Deferred(types.ModuleType):
    """The stand-in: ``main`` is a forwarder; anything else is the real module's."""

    @staticmethod
    def main(*args: object, **kwargs: object) -> object:
        """httpx's command line (``httpx.main``), loaded on first call."""
        real_main: Callable[..., object] = _real().main
        return real_main(*args, **kwargs)

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("__") and attr.endswith("__"):
            # The import system's own probes (``__path__``...): not the real module's.
            raise AttributeError(attr)
        return getattr(_real(), attr)


class _Hook:
    """A ``sys.meta_path`` finder and loader for ``httpx._main`` alone. (The import
    system only calls these methods; ``importlib.abc``'s base classes would cost every
    command ``importlib.resources`` and ``tempfile`` at start.)"""

    real = False  # set once the real module is wanted: from then on, not ours

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != _NAME or self.real:
            return None
        from importlib.machinery import ModuleSpec

        # (A loader by its methods, which is all the import system asks of one.)
        return ModuleSpec(fullname, self, origin="deferred by codemode.process.httpx_cli")  # type: ignore[arg-type]

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        return _Deferred(spec.name, "httpx's command line, imported on first use")

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_HOOK = _Hook()


def _real() -> types.ModuleType:
    """The real ``httpx._main``, imported now (once) in the stand-in's place."""
    current = sys.modules.get(_NAME)
    if current is not None and not isinstance(current, _Deferred):
        return current
    import importlib

    _HOOK.real = True
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
    sys.modules.pop(_NAME, None)
    return importlib.import_module(_NAME)


def defer() -> None:
    """Install the hook, unless httpx has been imported already."""
    if "httpx" in sys.modules or _HOOK in sys.meta_path:
        return
    sys.meta_path.insert(0, _HOOK)
