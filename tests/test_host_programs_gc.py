"""A session's roots are unregistered by a weakref finalizer, which the garbage collector
can run inside any allocation, including one made while ``writable_roots`` holds the
registry's lock: that must not deadlock (a test process once hung there for good)."""

from __future__ import annotations

import gc
import threading
import weakref

from codemode.locations import host_programs


class _Session:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it, at an allocation
        token = host_programs.register_roots(["/tmp/gc-roots-test"])
        weakref.finalize(self, host_programs.unregister_roots, token)


def _churn() -> None:
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # collect at nearly every allocation
    others: list[int] = []
    try:
        for _ in range(2000):
            _Session()
            host_programs.writable_roots()
            others.append(host_programs.register_roots(["/tmp/gc-roots-other"]))
    finally:
        gc.set_threshold(*old)
        for token in others:
            host_programs.unregister_roots(token)


def test_a_finalizer_unregistering_during_a_lookup_does_not_deadlock() -> None:
    worker = threading.Thread(target=_churn, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "writable_roots deadlocked with a finalizer"
    gc.collect()
    left = host_programs.writable_roots()
    assert "/tmp/gc-roots-test" not in left and "/tmp/gc-roots-other" not in left
