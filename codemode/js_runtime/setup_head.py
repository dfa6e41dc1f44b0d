"""The part of every isolate's setup script that never changes, evaluated ahead of time.

Every program's isolate starts with the same JavaScript: ``inspect.js`` and
``prelude.js``, about 37 KB (the *head*), then what is the program's own: its tools, its
globals, a host's setup scripts (``isolates.setup_script``). Evaluating the head takes a
fresh QuickJS isolate 2.5-4 ms, and the Codex host pays it at the first exec of every
turn, while Codex waits for the exec's calls.

So an engine worker makes one isolate and evaluates the head in it as soon as it has
booted, before it reads its first request (``Primed``), and again when its parent
tells it that its program has ended and it waits for the next (``protocol.PRIME``: a
worker kept idle between a session's programs; its old isolate is dropped first). An
``OPEN`` whose script begins with the head takes that isolate and evaluates only the
rest. The parent need not know: the script it sends is the same either way. Nothing
of any program has run in a primed isolate, only the head, so taking it is the same as
making a fresh isolate and evaluating the head there; one whose script does not begin
with the head (never ours) gets a fresh isolate, and the primed one is dropped.

The head is evaluated as a script of its own, then the rest as another: top-level
declarations of the two share the global scope as before; only a function declared in
the rest is no longer hoisted above the head, and the head calls none.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from codemode.process.package_data import read_text

if TYPE_CHECKING:
    from codemode.js_runtime.engine import Engine

# Names the head in V8's stack traces (frames of it are not the program's).
_SOURCE_URL = "\n\n//# sourceURL=codemode-prelude.js\n\n"


@cache
def head() -> str:
    """The head's text; ``inspect.js`` first: the prelude's console takes its formatter
    from it."""
    return "".join(read_text(__file__, n) for n in ("inspect.js", "prelude.js")) + _SOURCE_URL


class Primed:
    """At most one isolate with the head evaluated, waiting for an ``OPEN``."""

    def __init__(self, make: Callable[[], Engine], text: str) -> None:
        self._make = make
        self._head = text
        self._engine: Engine | None = None

    def prime(self) -> None:
        """Make the isolate and evaluate the head, unless one waits already. A failure
        leaves none: the ``OPEN`` then makes its own, and reports what goes wrong."""
        if self._engine is not None:
            return
        engine: Engine | None = None
        try:
            engine = self._make()
            engine.step(self._head)
        except Exception:
            if engine is not None:
                engine.close()
            return
        self._engine = engine

    def take(self, script: str) -> tuple[Engine, str] | None:
        """The primed isolate and what of ``script`` is left to evaluate in it; None
        (and the primed isolate dropped) when ``script`` does not begin with the head."""
        engine, self._engine = self._engine, None
        if engine is None:
            return None
        if not script.startswith(self._head):
            engine.close()
            return None
        return engine, script[len(self._head) :]
