"""Scratch folders for the repositories' copies, removed in the background.

Removing a copy costs one ``rmdir`` per folder, and on some filesystems (ext4 on the
VMs measured here: ~4.5 ms each) that is most of a small repository's overhead. So a
worker hands each finished scratch folder to a background thread and goes on with the
next repository; before the worker process exits (multiprocessing runs its
finalizers, ``atexit`` in a plain process) the thread finishes its queue.
"""

from __future__ import annotations

import atexit
import os
import queue
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from codemode.hostfs.removal import remove_tree

_PREFIX = "codemode-batch-"
_queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _remover() -> None:
    while (path := _queue.get()) is not None:
        # A script shaped the folder: removed by descriptor, whatever its depth and
        # modes, never following a link it planted.
        remove_tree(path)


def finish_removing() -> None:
    """Wait until every scratch folder handed over so far is removed."""
    global _thread
    with _lock:
        thread, _thread = _thread, None
    if thread is not None:
        _queue.put(None)
        thread.join()


def _start() -> None:
    global _thread
    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(target=_remover, name="scratch-remover", daemon=True)
        _thread.start()
    atexit.register(finish_removing)
    try:
        from multiprocessing import util

        util.Finalize(None, finish_removing, exitpriority=10)
    except ImportError:
        pass


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A fresh private folder, removed in the background once the block is left."""
    path = Path(tempfile.mkdtemp(prefix=_PREFIX))
    try:
        yield path
    finally:
        _start()
        _queue.put(path)


def vanished_copy(workspace: Path) -> bool:
    """Whether ``workspace`` lay in a scratch folder ``scratch_dir`` made that is gone:
    ``codemode-batch-*`` right in the temporary folder (mkdtemp: a name no one else is
    given), no longer there. No worker can be running in it, and nothing can be rolled
    back into it, so a write journal left for it (a worker killed in its copy) may go."""
    temp = Path(os.path.realpath(tempfile.gettempdir()))
    if not workspace.is_relative_to(temp):
        return False
    parts = workspace.relative_to(temp).parts
    if len(parts) < 2 or not parts[0].startswith(_PREFIX):
        return False
    return not os.path.lexists(temp / parts[0])
