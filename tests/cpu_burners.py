"""CPU burners for the tests that bound a time on a loaded machine (the ``burners`` and
``burners_later`` fixtures in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


class Burners:
    """One busy process per core, from ``start()`` until ``stop()``."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        if self.procs:
            return
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(os.cpu_count() or 2)]
        time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []
