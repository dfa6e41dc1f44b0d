"""Batch run figures, printed as one JSON object.

    .venv/bin/python benchmarks/batch.py [--repos 100] [--large 1000] [--ray] [--agent 50]

Generates small git repositories and runs ``interpreter run --repos`` over them with
``--jobs`` = the CPU count, a script that reads one file and returns (so what is
measured is the batch machinery: worker, isolate, the repository's copy, the journal,
the report). For each size:

- ``wall_s``: the whole command, start-up included; ``wall_per_repo_ms`` = wall / repos;
- ``repo_ms_median``: the median repository's own duration from the report (its copy,
  isolate, script and journal), i.e. the per-repository overhead;
- ``peak_rss_mb``: the peak of the summed RSS of the whole process tree (the driver,
  its workers, their engine processes and commands), sampled every 50 ms;
- ``cpu_per_repo_ms``: the CPU time (user + system) of the whole command and every
  process it waited for, per repository: start-up included, and what a busy machine
  changes least;
- ``load_avg``: the machine's 1-minute load average before and after the run.

``machinery``: in this process, what the all-or-nothing machinery costs one small
repository (its copy; the journal and diff of one changed and one new file; applying
that journal to the repository).

``--large N`` runs N repositories too and reports how each figure grew. ``--ray``
repeats the default size on a two-node Ray cluster started here (``ray start`` twice,
one CPU per job split over the two nodes): its total time against the local pool, and
the cost of shipping one repository (packing and unpacking its archive, its size); its
``peak_rss_mb`` is the driver's tree only (the nodes are not its children).
``--agent N`` runs ``interpreter exec --repos`` over N repositories against the
scripted model server (which answers at once): per-repository overhead beyond the
model's time. The default run is modest (100 repositories, local pool only).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INTERPRETER = Path(sys.executable).parent / "interpreter"
SCRIPT = 'return (await tools.read_file({path: "README.md"})).content.length;\n'


def make_repos(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    for i in range(count):
        repo = root / f"repo-{i:04d}"
        (repo / "src").mkdir(parents=True)
        (repo / "README.md").write_text(f"# repository {i}\n")
        for f in range(5):
            (repo / "src" / f"m{f}.py").write_text(f"VALUE = {f}\n" * 20)
    for start in range(0, count, 200):
        names = [f"repo-{i:04d}" for i in range(start, min(count, start + 200))]
        subprocess.run(["sh", "-c", "; ".join(f"git init -q {n}" for n in names)], cwd=root,
                       check=True)  # fmt: skip


def _tree_rss_kb(root_pid: int) -> int:
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields.get("PPid", "0").strip())
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0] or 0)
    tree = {root_pid}
    while new := {p for p, parent in parents.items() if parent in tree} - tree:
        tree |= new
    return sum(rss.get(p, 0) for p in tree)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def peak_rss(pid: int) -> Iterator[list[int]]:
    peak = [0]
    running = threading.Event()
    running.set()

    def sample() -> None:
        while running.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(pid))
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        running.clear()
        thread.join()


def run_batch(
    workdir: Path, command: list[str], env: dict[str, str] | None = None
) -> dict[str, Any]:
    report = workdir / "report.jsonl"
    report.unlink(missing_ok=True)
    load_before = os.getloadavg()[0]
    cpu_before = _children_cpu_s()
    started = time.perf_counter()
    proc = subprocess.Popen([str(INTERPRETER), *command, "--report", str(report)], cwd=workdir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    with peak_rss(proc.pid) as peak:
        _, stderr = proc.communicate()
    wall = time.perf_counter() - started
    cpu = _children_cpu_s() - cpu_before
    if proc.returncode != 0:
        sys.exit(f"batch run failed ({proc.returncode}):\n{stderr[-3000:]}")
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    repos = [line for line in lines if line.get("kind") != "run"]
    return {
        "repositories": len(repos),
        "wall_s": round(wall, 2),
        "wall_per_repo_ms": round(wall / len(repos) * 1000, 1),
        "repo_ms_median": round(statistics.median(r["duration_s"] for r in repos) * 1000, 1),
        "cpu_per_repo_ms": round(cpu / len(repos) * 1000, 1),
        "peak_rss_mb": round(peak[0] / 1024, 1),
        # The machine's 1-minute load average before and after: on a shared machine the
        # other figures mean little without it.
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def local_figures(tmp: Path, count: int, jobs: int) -> dict[str, Any]:
    workdir = tmp / f"local-{count}"
    make_repos(workdir / "repos", count)
    (workdir / "bench.js").write_text(SCRIPT)
    return run_batch(workdir, ["run", "bench.js", "--repos", "repos", "--jobs", str(jobs)])


def machinery_figures(tmp: Path) -> dict[str, Any]:
    """In this process, on one generated repository: what the all-or-nothing machinery
    adds to each repository's run (its copy, the journal and its diff, applying it)."""
    from codemode.batch import applying, changes, diff_text
    from codemode.batch.workcopy import make_copy

    root = tmp / "machinery"
    make_repos(root / "repos", 1)
    repo = root / "repos" / "repo-0000"
    copies, journals, applies = [], [], []
    for i in range(20):
        work = root / f"work{i}"
        started = time.perf_counter()
        make_copy(repo, work)
        copies.append(time.perf_counter() - started)
        (work / "README.md").write_text("changed\n")
        (work / "src" / "new.txt").write_text("new\n")
        started = time.perf_counter()
        journal = changes.compute(repo, work)
        diff_text.render(repo, journal)
        journals.append(time.perf_counter() - started)
        target = root / f"target{i}"  # the repository's twin, so each apply starts fresh
        make_copy(repo, target)
        started = time.perf_counter()
        applying.apply(target, journal)
        applies.append(time.perf_counter() - started)
    return {
        "copy_ms": round(statistics.median(copies) * 1000, 2),
        "journal_and_diff_ms": round(statistics.median(journals) * 1000, 2),
        "apply_ms": round(statistics.median(applies) * 1000, 2),
    }


def shipping_figures(tmp: Path) -> dict[str, Any]:
    from codemode.batch.shipping import pack, unpack

    repo = tmp / "local-ship" / "repos" / "repo-0000"
    make_repos(repo.parent, 1)
    packs, unpacks, size = [], [], 0
    for i in range(20):
        started = time.perf_counter()
        data = pack(repo)
        packs.append(time.perf_counter() - started)
        started = time.perf_counter()
        unpack(data, tmp / "local-ship" / f"out{i}")
        unpacks.append(time.perf_counter() - started)
        size = len(data)
    return {
        "archive_bytes": size,
        "pack_ms": round(statistics.median(packs) * 1000, 2),
        "unpack_ms": round(statistics.median(unpacks) * 1000, 2),
    }


def ray_figures(tmp: Path, count: int, jobs: int) -> dict[str, Any]:
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_TMPDIR=ray_tmp, HOME=str(tmp / "home"))
    ray = [sys.executable, "-m", "ray.scripts.scripts", "start", "--node-ip-address=127.0.0.1",
           "--disable-usage-stats", "--object-store-memory=100000000"]  # fmt: skip
    per_node = max(1, jobs // 2)
    try:
        subprocess.run([*ray, "--head", "--port=0", "--include-dashboard=false",
                        f"--num-cpus={per_node}", f"--temp-dir={ray_tmp}"], env=env, check=True,
                       capture_output=True, cwd=tmp)  # fmt: skip
        address = (Path(ray_tmp) / "ray_current_cluster").read_text().strip()
        subprocess.run([*ray, f"--address={address}", f"--num-cpus={per_node}"], env=env,
                       check=True, capture_output=True, cwd=tmp)  # fmt: skip
        workdir = tmp / f"local-{count}"
        command = ["run", "bench.js", "--repos", "repos", "--backend", "ray", "--ray-address",
                   address, "--jobs", str(jobs)]  # fmt: skip
        figures = run_batch(workdir, command, env=env)
    finally:
        subprocess.run([*ray[:3], "stop", "--force"], env=env, capture_output=True)
        _kill_marked(ray_tmp)
    figures["shipping"] = shipping_figures(tmp)
    return figures


def _kill_marked(marker: str) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "environ").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)


def agent_figures(tmp: Path, count: int, jobs: int) -> dict[str, Any]:
    from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer

    def reply(request: RecordedRequest) -> dict[str, Any]:
        if "tool" in json.dumps(request.body.get("messages", [])[-1:]):
            return {"text": "done"}
        code = 'return (await tools.read_file({path: "README.md"})).content.length;'
        return {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}

    workdir = tmp / f"agent-{count}"
    make_repos(workdir / "repos", count)
    with ScriptedModelServer(reply) as server:
        env = {**os.environ, "CODEMODE_HOME": str(tmp / "home")}
        command = ["exec", "-c", "model_provider=scripted", "-c",
                   f"model_providers.scripted.base_url={server.base_url}", "-c",
                   "model_providers.scripted.wire_api=chat", "--model", "bench",
                   "--repos", "repos", "--jobs", str(jobs), "Read the README"]  # fmt: skip
        return run_batch(workdir, command, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=100)
    parser.add_argument("--large", type=int, default=0, help="also this many (e.g. 1000)")
    parser.add_argument("--ray", action="store_true", help="also on a two-node Ray cluster")
    parser.add_argument("--agent", type=int, default=0, help="agent-driven, this many repos")
    args = parser.parse_args()
    jobs = os.cpu_count() or 1
    figures: dict[str, Any] = {"jobs": jobs}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        figures["machinery"] = machinery_figures(tmp)
        figures[f"local_{args.repos}"] = small = local_figures(tmp, args.repos, jobs)
        if args.large:
            figures[f"local_{args.large}"] = large = local_figures(tmp, args.large, jobs)
            figures["growth"] = {
                key: round(large[key] / small[key], 2)
                for key in ("wall_per_repo_ms", "repo_ms_median", "cpu_per_repo_ms", "peak_rss_mb")
            }
        if args.ray:
            figures[f"ray_two_nodes_{args.repos}"] = ray = ray_figures(tmp, args.repos, jobs)
            figures["ray_vs_local_wall"] = round(ray["wall_s"] / small["wall_s"], 2)
        if args.agent:
            figures[f"agent_{args.agent}"] = agent_figures(tmp, args.agent, jobs)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
