"""A batch worker process reuses its engine worker from one repository to the next
(``codemode/batch/programs.py``); nothing of one repository's script may reach the
next one's: its globals, prototypes, timers, files in its scratch folder, its
environment, the ``repo`` global it was given."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

INTERPRETER = Path(sys.executable).parent / "interpreter"

# Each repository first looks for what the ones before it (in the same worker process,
# with --jobs 1) planted, then plants all of it itself.
PLANT_AND_LOOK = r"""
const seen = [];
if (typeof plantedVar !== "undefined") seen.push("var: " + plantedVar);
if (globalThis.__planted !== undefined) seen.push("globalThis: " + globalThis.__planted);
if (({}).planted !== undefined) seen.push("Object.prototype: " + ({}).planted);
if (JSON.stringify([1]) !== "[1]") seen.push("JSON.stringify replaced");
if (repo.name !== repo.path.split("/").pop()) seen.push("repo global: " + JSON.stringify(repo));
// (the sandbox makes .git and .codemode in every writable folder, itself)
const listing = 'ls -A "$TMPDIR" | grep -vx -e .git -e .codemode';
const before = await tools.shell({command: `${listing}; echo "env=\${PLANTED_ENV:-}"`});
if (before.output.trim() !== "env=") seen.push("scratch or env: " + before.output.trim());
// A timer planted by the previous repository (it would fire about now) writes nothing.
await new Promise(resolve => setTimeout(resolve, 700));
const names = (await tools.list_dir({})).entries.map(e => e.path);
if (names.includes("late.txt")) seen.push("a timer of another repository wrote here");

const me = repo.name;
globalThis.eval("var plantedVar = " + JSON.stringify(me));
globalThis.__planted = me;
Object.prototype.planted = me;
repo.name = "hacked";
const planted = await tools.shell({
  command: `echo secret > "$TMPDIR/planted.txt"; export PLANTED_ENV=1; ${listing}`,
});
setTimeout(() => { tools.write_file({path: "late.txt", content: "from " + me}); }, 300);
JSON.stringify = () => "hacked";
return {seen, planted: planted.output.trim(), var: plantedVar};
"""


def _make_repos(root: Path, count: int) -> list[Path]:
    repos = []
    for i in range(count):
        repo = root / f"repo-{i}"
        repo.mkdir(parents=True)
        (repo / "README.md").write_text(f"repository {i}\n")
        repos.append(repo)
    subprocess.run(["sh", "-c", "; ".join(f"git init -q {r.name}" for r in repos)],
                   cwd=root, check=True)  # fmt: skip
    return repos


def test_a_repository_sees_nothing_of_the_ones_before_it(tmp_path: Path) -> None:
    repos = _make_repos(tmp_path / "repos", 4)
    script = tmp_path / "plant.js"
    script.write_text(PLANT_AND_LOOK)
    # One worker process: the four repositories run one after another in it, so each
    # one's engine worker is the previous one's.
    proc = subprocess.run(
        [str(INTERPRETER), "run", str(script), "--repos", "repos", "--jobs", "1",
         "--report", "r.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()][1:]
    assert [Path(line["repository"]).name for line in lines] == [r.name for r in repos]
    for line in lines:
        name = Path(line["repository"]).name
        assert line["status"] == "ok", line
        # It did plant (so the next one had something to find), and found nothing.
        assert line["value"] == {"seen": [], "planted": "planted.txt", "var": name}, line
    for repo in repos:
        assert not (repo / "late.txt").exists()
        assert sorted(p.name for p in repo.iterdir()) == [".git", "README.md"]


def test_consecutive_repositories_share_the_engine_process(tmp_path: Path) -> None:
    """What the test above relies on: in one worker process, the second repository's
    script runs in the engine process the first one's ran in (in a fresh isolate)."""
    from codemode.batch import programs
    from codemode.batch.models import RepoTask
    from codemode.batch.worker import run_repository

    repos = _make_repos(tmp_path / "repos", 2)
    script = "globalThis.x = (globalThis.x ?? 0) + 1; return [x, repo.name];"
    pids: list[set[int]] = []
    results: list[Any] = []
    for repo in repos:
        result = run_repository(RepoTask(repository=str(repo), source=script))
        results.append(result.value)
        kept = programs._kept
        assert kept is not None
        pids.append({w.pid for w in kept.session._isolates._idle})
    assert results == [[1, "repo-0"], [1, "repo-1"]]
    assert pids[0] and pids[0] == pids[1]
    programs._close()
    asyncio.run(asyncio.sleep(0))
