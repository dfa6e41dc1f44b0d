"""A call that must end: run in a thread, its result (or the exception it raised)
handed back, the test failed if it has not ended within a minute. For reads that a
shaped file could hang (a FIFO) or make endless (``/dev/zero``): a plain call would
hang the test run itself."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def bounded(call: Callable[[], Any], seconds: float = 60) -> Any:
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(call())
        except BaseException as exc:  # (handed to the test)
            found.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the call hung (or read without end)"
    return found[0]
