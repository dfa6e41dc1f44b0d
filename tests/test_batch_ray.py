"""Batch runs on a real two-node Ray cluster started here with `ray start`, whose
Python lacks codemode: codemode reaches the workers through Ray's runtime environment,
repositories travel as archives and come back as journals, a worker killed mid-run is
retried from the original state, and a node that lacks something is named before any
repository runs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_batch import interp, read_report, stop_cluster

pytest.importorskip("ray", reason="the Ray tests need Ray (pip install 'codemode[ray]')")


def python_without_codemode(where: Path) -> Path:
    """A Python that has this environment's packages but not codemode: a venv whose
    .pth names this site-packages directory (a path in a .pth is added as it is, its
    own .pth files, codemode's editable install among them, are not read)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(where)], check=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    [site] = where.glob("lib/python3*/site-packages")
    (site / "test-env.pth").write_text(f"{purelib}\n")
    python = where / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import ray, quickjs; import codemode"],
                           capture_output=True, text=True, cwd=where)  # fmt: skip
    assert "No module named 'codemode'" in probe.stderr, probe.stderr
    return python


def path_without_git(where: Path) -> Path:
    """A folder with every program on PATH but git (as links)."""
    where.mkdir()
    for folder in reversed(os.environ["PATH"].split(os.pathsep)):
        with contextlib.suppress(OSError):
            for program in Path(folder).iterdir():
                if program.name != "git":
                    with contextlib.suppress(OSError):
                        (where / program.name).unlink(missing_ok=True)
                        (where / program.name).symlink_to(program)
    return where


@contextlib.contextmanager
def two_node_cluster(tmp: Path) -> Iterator[tuple[str, dict[str, str], list[str]]]:
    python = python_without_codemode(tmp / "nocodemode")
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_TMPDIR=ray_tmp, HOME=str(tmp / "home"))
    env.pop("PYTHONPATH", None)
    ray = [str(python), "-m", "ray.scripts.scripts", "start", "--node-ip-address=127.0.0.1",
           "--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats"]  # fmt: skip
    try:
        head = subprocess.run(
            [*ray, "--head", "--port=0", "--include-dashboard=false", f"--temp-dir={ray_tmp}"],
            env=env, capture_output=True, text=True, timeout=180, cwd=tmp,
        )  # fmt: skip
        assert head.returncode == 0, head.stderr
        address = (Path(ray_tmp) / "ray_current_cluster").read_text().strip()
        node = subprocess.run([*ray, f"--address={address}"], env=env, capture_output=True,
                              text=True, timeout=180, cwd=tmp)  # fmt: skip
        assert node.returncode == 0, node.stderr
        yield address, env, ray
    finally:
        stop_cluster(ray_tmp)


SCRIPT = """
await tools.shell({command: "echo run >> count.txt; printf 'B\\\\000' > blob.bin"});
if (repo.name === "r1") {
  // Killed once, mid-run, after writing: the retry must start from the original.
  const once = `[ -e ${argv[0]} ] || { touch ${argv[0]}; kill -9 $PPID; sleep 5; }`;
  await tools.shell({command: once});
}
if (repo.name === "r2") throw new Error("r2 fails after writing");
await tools.shell({command: "sleep 1"});
return repo.path;
"""


def test_a_two_node_cluster_without_codemode_installed(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    for i in range(6):
        repo = repos / f"r{i}"
        repo.mkdir(parents=True)
        (repo / "count.txt").write_text("")
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (tmp_path / "s.js").write_text(SCRIPT)
    marker = tmp_path / "killed-once"
    with two_node_cluster(tmp_path) as (address, env, ray):
        run = ["run", "s.js", "--repos", "repos", "--backend", "ray", "--ray-address", address,
               "--sandbox", "danger-full-access", "--approval", "never"]  # fmt: skip
        proc = interp(*run, "--report", "r.jsonl", "--", marker, cwd=tmp_path,
                      env=env, timeout=600)  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        report = read_report(tmp_path / "r.jsonl")
        assert {k: v["status"] for k, v in report.items()} == {
            "r0": "ok", "r1": "ok", "r2": "failed", "r3": "ok", "r4": "ok", "r5": "ok",
        }, proc.stderr  # fmt: skip
        assert report["r1"]["attempts"] == 2 and marker.exists()
        assert "r2 fails after writing" in report["r2"]["error"]
        assert report["r2"]["rolled_back"] is True
        assert len({line["worker"] for line in report.values()}) == 2  # both nodes ran some
        for name, line in report.items():
            # The script ran in a copy on the worker, never in the repository itself.
            assert not line["value"] or not line["value"].startswith(str(repos)), line
            expected = "" if name == "r2" else "run\n"
            assert (repos / name / "count.txt").read_text() == expected, name
            assert (repos / name / "blob.bin").exists() == (name != "r2")
        assert (repos / "r0" / "blob.bin").read_bytes() == b"B\x00"
        # A third node whose PATH lacks git: named by the pre-flight check; nothing runs.
        bare_env = {**env, "PATH": str(path_without_git(tmp_path / "nogit"))}
        third = subprocess.run([*ray, f"--address={address}"], env=bare_env,
                               capture_output=True, text=True, timeout=180,
                               cwd=tmp_path)  # fmt: skip
        assert third.returncode == 0, third.stderr
        refused = interp(*run, "--report", "p.jsonl", "--", marker, cwd=tmp_path, env=env,
                         timeout=600)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert "pre-flight check failed, no repository was run" in refused.stderr
        assert "git is not on PATH" in refused.stderr
        assert "\x1b" not in refused.stderr
        assert not (tmp_path / "p.jsonl").exists()


def test_a_ray_task_error_reads_as_its_cause() -> None:
    """Ray's RayTaskError leads with a coloured ``ray::run_repository()`` banner; the
    report line gives the exception that failed the task, and no terminal code."""
    import ray

    from codemode.batch.ray_checks import describe_failure

    traceback = (
        "Traceback (most recent call last):\n  File \"worker.py\", line 1, in <module>\n"
        "ModuleNotFoundError: No module named 'quickjs'"
    )
    error = ray.exceptions.RayTaskError(
        "run_repository", traceback, ModuleNotFoundError("No module named 'quickjs'"),
        proctitle="ray::run_repository()", pid=12, ip="127.0.0.1",
    )  # fmt: skip
    assert "\x1b[" in str(error)  # what Ray itself shows
    assert describe_failure(ray, error) == (
        "Ray task failed: ModuleNotFoundError: No module named 'quickjs'"
    )
