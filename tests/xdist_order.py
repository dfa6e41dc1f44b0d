"""The order pytest-xdist hands test files to its workers (scripts/test.sh runs
``--dist loadfile``): the files that need the real local model go as soon as its
background build has ended, or at once when nothing is building, and the rest of the
suite fills the wait, so that a cold run's longest chain, the build and then those
tests, starts its second part as early as it can. (xdist's own order, the files with
the most tests first, would hand a local-model file to a worker that then waits for
the build; and pytest's item order, which tests/conftest.py sorts, does not reach the
scheduler.) Among the files of each kind xdist's order holds."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

from codemode_testkit.local_model import build_running


@cache
def needs_local_model(path: Path) -> bool:
    """A test file that imports ``find_local_model`` (tests/conftest.py's rule)."""
    try:
        return "find_local_model" in path.read_text(encoding="utf-8")
    except OSError:
        return False


class LocalModelWhenBuilt(LoadFileScheduling):
    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.root = config.rootpath

    def _assign_work_unit(self, node: WorkerController) -> None:
        """Move the file this worker should take next to the head of the queue; the
        parent class pops the head."""
        local = [s for s in self.workqueue if needs_local_model(self.root / s)]
        rest = [s for s in self.workqueue if s not in local]
        if local and not (rest and build_running()):
            self.workqueue.move_to_end(local[0], last=False)
        elif rest:
            self.workqueue.move_to_end(rest[0], last=False)
        super()._assign_work_unit(node)
