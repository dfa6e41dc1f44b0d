"""Batch runs: `interpreter run SCRIPT --repos ...` over generated git repositories,
through the real console script, worker processes and isolates."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.batch.repos import RepoListError, find_repositories
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.dry_run import DryRun

INTERPRETER = Path(sys.executable).parent / "interpreter"
N_REPOS = 50
BROKEN = {7, 23, 41}  # repositories the script is made to fail on

# Bumps the patch version; throws in repositories holding a BROKEN file. It reads the
# file back after writing it, which a dry run must answer from its overlay.
BUMP = """
const before = (await tools.read_file({path: "version.txt"})).content.trim();
const listing = await tools.list_dir({});
if (listing.entries.some(e => e.path === "BROKEN")) {
  throw new Error(`broken repository ${repo.name}`);
}
const next = before.replace(/\\.(\\d+)$/, (_, n) => "." + (Number(n) + 1));
await tools.write_file({path: "version.txt", content: next + "\\n"});
const after = (await tools.read_file({path: "version.txt"})).content.trim();
console.log(`${repo.name}: ${before} -> ${after}`);
return {name: repo.name, version: after};
"""


def make_repos(root: Path, count: int = N_REPOS) -> list[Path]:
    """``count`` small git working copies under ``root``, a few marked BROKEN."""
    repos = []
    for i in range(count):
        repo = root / f"repo-{i:02d}"
        (repo / "src").mkdir(parents=True)
        (repo / "version.txt").write_text(f"1.{i}.0\n")
        (repo / "src" / "main.txt").write_text(f"repository {i}\n")
        if i in BROKEN:
            (repo / "BROKEN").write_text("")
        repos.append(repo)
    # One git call for all of them: each `git init` costs a process start.
    script = "; ".join(f"git init -q {r.name}" for r in repos)
    subprocess.run(["sh", "-c", script], cwd=root, check=True)
    return repos


def interp(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INTERPRETER), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def report_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_report(path: Path, resumed: bool = False) -> dict[str, dict[str, Any]]:
    """The repository lines of a report by repository name (its run header checked);
    ``resumed``: a report appended to, where a later line for a repository wins."""
    [header, *lines] = report_lines(path)
    assert header["kind"] == "run" and header["started_at"], header
    lines = [line for line in lines if line.get("kind") != "run"]
    by_repo = {Path(line["repository"]).name: line for line in lines}
    if not resumed:
        assert len(by_repo) == len(lines), "a repository was reported twice"
    return by_repo


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "repos").mkdir()
    (tmp_path / "bump.js").write_text(BUMP)
    return tmp_path


def check_bump_report(report: dict[str, dict[str, Any]], *, dry_run: bool) -> None:
    assert len(report) == N_REPOS
    for i in range(N_REPOS):
        name = f"repo-{i:02d}"
        line = report[name]
        assert set(line) >= {"repository", "status", "duration_s", "tool_calls", "error"}
        assert line["duration_s"] >= 0
        if i in BROKEN:
            assert line["status"] == "failed", line
            assert f"broken repository {name}" in line["error"]
            assert line["error_kind"] == "runtime"
            assert line["tool_calls"] == 2
        else:
            assert line["status"] == "ok", line
            assert line["error"] is None
            assert line["tool_calls"] == 4
            assert line["value"] == {"name": name, "version": f"1.{i}.1"}
            assert line["output"] == f"{name}: 1.{i}.0 -> 1.{i}.1"
        assert line["attempts"] == 1 and line["started_at"] <= line["ended_at"]
        if i in BROKEN:
            assert line["changed_files"] == [] and line["diff"] == ""
        else:
            assert line["changed_files"] == ["version.txt"]
            assert line["diff"] == (
                "diff --git a/version.txt b/version.txt\n"
                "--- a/version.txt\n+++ b/version.txt\n"
                f"@@ -1 +1 @@\n-1.{i}.0\n+1.{i}.1\n"
            )
        if dry_run:
            assert "rolled_back" not in line
        else:
            assert line["rolled_back"] is False


def test_fifty_repositories_in_parallel(workdir: Path) -> None:
    repos = make_repos(workdir / "repos")
    report = workdir / "out" / "report.jsonl"
    proc = interp(
        "run", "bump.js", "--repos", "repos", "--jobs", "2", "--report", report, cwd=workdir
    )
    assert proc.returncode == 1, proc.stderr  # some failed
    assert proc.stdout == ""
    check_bump_report(read_report(report), dry_run=False)
    for i, repo in enumerate(repos):
        expected = f"1.{i}.0\n" if i in BROKEN else f"1.{i}.1\n"
        assert (repo / "version.txt").read_text() == expected
    # Progress on a pipe: one plain line per repository, then the summary.
    lines = proc.stderr.splitlines()
    assert sum(1 for line in lines if line.startswith("[")) == N_REPOS
    assert any(line.startswith("[") and " failed " in line and "repo-23" in line for line in lines)
    assert f"{N_REPOS} repositories: 47 done, 3 failed, 0 not run" in lines[-1]
    assert str(report) in lines[-1]


def test_repository_list_file_and_exit_zero(workdir: Path) -> None:
    repos = make_repos(workdir / "repos", 5)
    (workdir / "list.txt").write_text(
        "# repositories to bump\n\nrepos/repo-01\n" + f"{repos[3]}\n" + "repos/repo-01\n"
    )
    proc = interp("run", "bump.js", "--repos", "list.txt", "--report", "r.jsonl", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    report = read_report(workdir / "r.jsonl")
    assert sorted(report) == ["repo-01", "repo-03"]  # the repeat runs once
    assert all(line["status"] == "ok" for line in report.values())
    assert (repos[0] / "version.txt").read_text() == "1.0.0\n"  # not listed, not touched


def test_repos_takes_a_shell_glob_as_typed(workdir: Path) -> None:
    """`--repos repos/repo-0*` expands to several words: every one is a repository; the
    script's argv goes after `--` (a word after --repos is a --repos value)."""
    make_repos(workdir / "repos", 4)
    (workdir / "argv.js").write_text("return argv;")
    proc = subprocess.run(
        ["sh", "-c",
         f'"{INTERPRETER}" run argv.js --repos repos/repo-0* --report r.jsonl -- old new'],
        cwd=workdir, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = read_report(workdir / "r.jsonl")
    assert sorted(report) == ["repo-00", "repo-01", "repo-02", "repo-03"]
    assert all(line["value"] == ["old", "new"] for line in report.values())
    assert "4 repositories: 4 done" in proc.stderr.splitlines()[-1]
    # A directory meant as a script argument goes after `--`.
    proc = interp("run", "argv.js", "--repos", "repos/repo-00", "--report", "r2.jsonl",
                  "--", "repos/repo-01", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert [line["value"] for line in read_report(workdir / "r2.jsonl").values()] == [
        ["repos/repo-01"]
    ]


def test_each_repository_is_confined_to_itself(workdir: Path) -> None:
    repos = make_repos(workdir / "repos", 3)
    (workdir / "escape.js").write_text(
        """
const [a, b] = ["repo-00", "repo-01", "repo-02"].filter(name => name !== repo.name);
const refused = [];
for (const path of [`../${a}/pwned.txt`, `${repo.path}/../${b}/pwned.txt`, "/tmp/pwned"]) {
  try { await tools.write_file({path, content: "x"}); }
  catch (e) { refused.push(e.message); }
}
await tools.write_file({path: "mine.txt", content: "ok"});
if (refused.length < 3) throw new Error("escaped: " + (3 - refused.length));
// Commands are confined to the repository too (by the sandbox, on by default).
const command = `echo x > ../${a}/escaped.txt; echo mine > shell.txt`;
try { await tools.shell({command}); } catch (e) { refused.push(e.message); }
return refused;
"""
    )
    proc = interp(
        "run", "escape.js", "--repos", "repos", "--jobs", "2", "--report", "r.jsonl",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    report = read_report(workdir / "r.jsonl")
    for line in report.values():
        assert line["status"] == "ok"
        assert all("outside the writable roots" in m for m in line["value"][:3])
    for repo in repos:
        assert not (repo / "pwned.txt").exists()
        assert not (repo / "escaped.txt").exists()
        assert (repo / "shell.txt").read_text() == "mine\n"
        assert (repo / "mine.txt").read_text() == "ok"


def test_dry_run_records_diffs_and_changes_nothing(workdir: Path) -> None:
    repos = make_repos(workdir / "repos")
    before = {r: (r / "version.txt").read_text() for r in repos}
    proc = interp(
        "run", "bump.js", "--repos", "repos", "--dry-run", "--jobs", "2",
        "--report", "r.jsonl", cwd=workdir,
    )
    assert proc.returncode == 1, proc.stderr
    check_bump_report(read_report(workdir / "r.jsonl"), dry_run=True)
    assert {r: (r / "version.txt").read_text() for r in repos} == before
    assert not any(p.name.endswith(".tmp") for r in repos for p in r.iterdir())


PATCH_AFTER_WRITE = """
await tools.write_file({path: "notes.txt", content: "draft\\n"});
await tools.apply_patch(`*** Begin Patch
*** Update File: notes.txt
@@
-draft
+final
*** Update File: version.txt
@@
-1.0.0
+2.0.0
*** Delete File: src/main.txt
*** End Patch`);
const notes = await tools.read_file({path: "notes.txt"});
let gone = false;
try { await tools.read_file({path: "src/main.txt"}); } catch (e) { gone = true; }
return {notes: notes.content, gone};
"""


def test_dry_run_covers_apply_patch(workdir: Path) -> None:
    repos = make_repos(workdir / "repos", 2)
    (workdir / "patch.js").write_text(PATCH_AFTER_WRITE)
    for repo in repos:
        (repo / "version.txt").write_text("1.0.0\n")
    proc = interp(
        "run", "patch.js", "--repos", "repos", "--dry-run", "--report", "r.jsonl", cwd=workdir
    )
    assert proc.returncode == 0, proc.stderr
    for name, line in read_report(workdir / "r.jsonl").items():
        # The patch applied on top of the dry run's own write, and reads see both.
        assert line["value"] == {"notes": "final\n", "gone": True}, name
        assert line["changed_files"] == ["notes.txt", "src/main.txt", "version.txt"]
        assert "+++ b/notes.txt\n@@ -0,0 +1 @@\n+final\n" in line["diff"]
        assert "--- a/src/main.txt\n+++ /dev/null\n" in line["diff"]
        assert "-1.0.0\n+2.0.0\n" in line["diff"]
    for i, repo in enumerate(repos):
        assert (repo / "version.txt").read_text() == "1.0.0\n"
        assert (repo / "src" / "main.txt").read_text() == f"repository {i}\n"
        assert not (repo / "notes.txt").exists()


def test_dry_run_refuses_the_shell(workdir: Path) -> None:
    make_repos(workdir / "repos", 1)
    (workdir / "sh.js").write_text('await tools.shell({command: "touch created"});\n')
    proc = interp(
        "run", "sh.js", "--repos", "repos", "--dry-run", "--report", "r.jsonl", cwd=workdir
    )
    assert proc.returncode == 1
    line = read_report(workdir / "r.jsonl")["repo-00"]
    assert "tools.shell is refused in a dry run" in line["error"]
    assert not (workdir / "repos" / "repo-00" / "created").exists()


def processes_running(needle: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if cmdline.startswith(needle):
                found.append(int(entry.name))
    return found


def test_interrupt_stops_workers_and_their_commands(workdir: Path) -> None:
    make_repos(workdir / "repos", 6)
    # A unique duration marks the commands (bwrap's PID namespace hides their pids).
    (workdir / "slow.js").write_text(
        'await tools.shell({command: "sleep 31.4159", timeout_ms: 60000});\n'
    )
    proc = subprocess.Popen(
        [INTERPRETER, "run", "slow.js", "--repos", "repos", "--jobs", "2", "--report", "r.jsonl"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(processes_running(b"sleep 31.4159")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(processes_running(b"sleep 31.4159")) == 2
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "6 repositories: 0 done, 0 failed, 6 not run" in stderr
    assert stderr.splitlines()[-1] == "interrupted"
    assert read_report(workdir / "r.jsonl") == {}  # the run's header only
    deadline = time.monotonic() + 5
    while processes_running(b"sleep 31.4159") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_running(b"sleep 31.4159") == []


def test_a_dying_worker_fails_only_its_repository(workdir: Path) -> None:
    repos = make_repos(workdir / "repos", 6)
    (repos[2] / "KILL").write_text("")
    # The shell's parent is the worker process: killing it breaks the pool.
    (workdir / "die.js").write_text(
        """
const names = (await tools.list_dir({})).entries.map(e => e.path);
if (names.includes("KILL")) await tools.shell({command: "kill -9 $PPID; sleep 5"});
await tools.write_file({path: "done.txt", content: repo.name});
return "ok";
"""
    )
    proc = interp(
        "run", "die.js", "--repos", "repos", "--jobs", "2", "--report", "r.jsonl",
        "--sandbox", "danger-full-access", "--approval", "never", cwd=workdir,
    )
    assert proc.returncode == 1, proc.stderr
    report = read_report(workdir / "r.jsonl")
    assert len(report) == 6
    dead = report.pop("repo-02")
    assert dead["status"] == "failed" and dead["error_kind"] == "worker"
    assert "worker process died while running this repository" in dead["error"]
    assert all(line["status"] == "ok" for line in report.values()), report
    assert [(r / "done.txt").exists() for r in repos] == [True, True, False, True, True, True]


def test_report_survives_strings_utf8_cannot_encode(workdir: Path) -> None:
    make_repos(workdir / "repos", 1)
    (workdir / "odd.js").write_text('console.log("half \\uD800 pair"); return "\\uDC00";\n')
    proc = interp("run", "odd.js", "--repos", "repos", "--report", "r.jsonl", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    line = read_report(workdir / "r.jsonl")["repo-00"]
    # The runtime turns lone surrogates into U+FFFD at its boundary.
    assert (line["output"], line["value"]) == ("half \ufffd pair", "\ufffd")


def test_a_single_run_dry_run_prints_the_diff_and_writes_nothing(workdir: Path) -> None:
    [repo] = make_repos(workdir / "repos", 1)
    (workdir / "one.js").write_text(BUMP.replace("repo.name", "'repo-00'"))
    proc = interp("run", workdir / "one.js", "--dry-run", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "version.txt").read_text() == "1.0.0\n"  # nothing written
    assert proc.stdout.startswith("repo-00: 1.0.0 -> 1.0.1\n")  # the read-back saw it
    assert proc.stdout.endswith(
        "diff --git a/version.txt b/version.txt\n--- a/version.txt\n+++ b/version.txt\n"
        "@@ -1 +1 @@\n-1.0.0\n+1.0.1\n"
    ), proc.stdout
    assert "dry run: 1 file would change (nothing written)" in proc.stderr
    as_json = interp("run", workdir / "one.js", "--dry-run", "--json", cwd=repo)
    data = json.loads(as_json.stdout)
    assert data["changed_files"] == ["version.txt"] and "+1.0.1" in data["diff"]
    assert not list(repo.glob("*.jsonl"))


def test_batch_report_goes_under_codemode_home_and_v_shows_each_output(
    workdir: Path,
) -> None:
    make_repos(workdir / "repos", 3)
    home = workdir / "home"
    env = {**os.environ, "CODEMODE_HOME": str(home)}
    proc = interp("run", "bump.js", "--repos", "repos", "-v", "--jobs", "1", cwd=workdir,
                  env=env)
    assert proc.returncode == 0, proc.stderr
    assert not list(workdir.glob("*.jsonl"))  # not in the current directory
    [report] = (home / "batch").glob("codemode-batch-*.jsonl")
    assert str(report) in proc.stderr.splitlines()[-1]
    for i in range(3):
        assert f"  repo-{i:02d}: 1.{i}.0 -> 1.{i}.1" in proc.stderr  # the console output
        assert f'  → {{"name": "repo-{i:02d}", "version": "1.{i}.1"}}' in proc.stderr


def test_a_syntax_error_is_reported_once_before_any_repository_runs(workdir: Path) -> None:
    repos = make_repos(workdir / "repos", 4)
    (workdir / "bad.js").write_text("await tools.write_file({path: 'x', content: 'y'});\n"
                                    "const a = ;\n")
    proc = interp("run", "bad.js", "--repos", "repos", "--report", "r.jsonl", cwd=workdir)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert sum("SyntaxError" in line for line in lines) == 1, proc.stderr
    assert "at 2:11" in proc.stderr and "no repository was run" in proc.stderr
    assert not (workdir / "r.jsonl").exists()
    assert not any((r / "x").exists() for r in repos)


def test_batch_usage_errors(workdir: Path) -> None:
    (workdir / "plain").mkdir()
    (workdir / "empty.txt").write_text("# nothing\n")
    (workdir / "missing.txt").write_text("repos/nope\n")
    cases = [
        (["--jobs", "2", "--report", "x.jsonl"], "--jobs, --report only apply to batch runs"),
        (["--repos", "empty.txt"], "names no repository"),
        (["--repos", "missing.txt"], "missing.txt:1: no such directory: repos/nope"),
        (["--repos", ".", "--ray-address", "auto"], "--ray-address needs --backend ray"),
    ]
    for extra, message in cases:
        proc = interp("run", "bump.js", *extra, cwd=workdir)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert message in proc.stderr, (extra, proc.stderr)
    assert not list(workdir.glob("*.jsonl"))


def test_find_repositories_dir_forms(tmp_path: Path) -> None:
    (tmp_path / "a" / ".git").mkdir(parents=True)
    (tmp_path / "b" / ".hg").mkdir(parents=True)
    (tmp_path / "c").mkdir()  # not a working copy: skipped
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: elsewhere\n")  # a git worktree
    assert find_repositories([tmp_path]) == [tmp_path / n for n in ("a", "b", "wt")]
    # A DIR that is itself a working copy is that one repository.
    assert find_repositories([tmp_path / "a", tmp_path]) == [
        tmp_path / n for n in ("a", "b", "wt")
    ]
    with pytest.raises(RepoListError, match="no such file or directory"):
        find_repositories([tmp_path / "zzz"])


# --- the dry-run overlay on its own --------------------------------------------------


async def test_overlay_reads_back_and_diffs_new_and_symlinked_files(tmp_path: Path) -> None:
    from codemode.tools.builtin import builtin_registry

    (tmp_path / "real.txt").write_text("one\ntwo")
    (tmp_path / "link.txt").symlink_to("real.txt")
    ctx = ToolContext(workspace=tmp_path, dry_run=DryRun())
    registry = builtin_registry()
    await registry.invoke("write_file", {"path": "link.txt", "content": "one\n2\n"}, ctx)
    made = await registry.invoke("write_file", {"path": "new/dir/f.txt", "content": "hi\n"}, ctx)
    assert made["created"]
    seen = await registry.invoke("read_file", {"path": "real.txt"}, ctx)
    assert seen["content"] == "one\n2\n"  # written through the link, read by its target
    with pytest.raises(ToolError, match="is a file"):
        await registry.invoke("write_file", {"path": "real.txt/x", "content": ""}, ctx)
    assert (tmp_path / "real.txt").read_text() == "one\ntwo"
    assert not (tmp_path / "new").exists()
    assert ctx.dry_run is not None
    assert ctx.dry_run.changed_paths(tmp_path) == ["new/dir/f.txt", "real.txt"]
    assert ctx.dry_run.diff(tmp_path) == (
        "diff --git a/new/dir/f.txt b/new/dir/f.txt\nnew file\n"
        "--- /dev/null\n+++ b/new/dir/f.txt\n@@ -0,0 +1 @@\n+hi\n"
        "diff --git a/real.txt b/real.txt\n--- a/real.txt\n+++ b/real.txt\n"
        "@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+2\n"
    )


# --- Ray ---------------------------------------------------------------------------


def test_ray_backend_gives_the_same_report(workdir: Path) -> None:
    make_repos(workdir / "repos")
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        # A short private temp dir: Ray's socket paths must fit in 107 bytes. A home of
        # its own too: a local Ray instance leaves an auth token in ~/.ray.
        env = {**os.environ, "RAY_TMPDIR": ray_tmp, "HOME": str(workdir / "home")}
        # Ray's processes while the batch runs, told from other Ray instances on the
        # machine (another checkout's tests) by this run's temp dir.
        seen: set[bytes] = set()  # their command lines
        running = threading.Event()
        running.set()

        def watch() -> None:
            while running.is_set():
                seen.update(_cmdline(pid) for pid in cluster_processes(ray_tmp))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            proc = interp(
                "run", "bump.js", "--repos", "repos", "--backend", "ray", "--jobs", "2",
                "--report", "ray.jsonl", "--dry-run", cwd=workdir, env=env, timeout=180,
            )
        finally:
            running.clear()
            watcher.join()
        left = cluster_processes(ray_tmp)
        raylet_logs = [p.read_text() for p in Path(ray_tmp).rglob("raylet.out")]
    assert proc.returncode == 1, proc.stderr
    ray_report = read_report(workdir / "ray.jsonl")
    check_bump_report(ray_report, dry_run=True)
    assert f"{N_REPOS} repositories: 47 done, 3 failed" in proc.stderr.splitlines()[-1]
    # The same batch on the local backend reports the same, durations aside.
    local = interp(
        "run", "bump.js", "--repos", "repos", "--jobs", "2", "--report", "local.jsonl",
        "--dry-run", cwd=workdir,
    )
    assert local.returncode == 1, local.stderr
    local_report = read_report(workdir / "local.jsonl")

    def timeless(report: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        times = {"duration_s": None, "started_at": None, "ended_at": None, "worker": None}
        return {k: {**line, **times} for k, line in report.items()}

    assert timeless(ray_report) == timeless(local_report)
    # The local instance ran on the loopback address, and is gone.
    assert raylet_logs and all("node_manager address: 127.0.0.1:" in log for log in raylet_logs)
    assert any(b"raylet" in cmdline for cmdline in seen), "never saw this run's raylet"
    assert left == set(), f"processes of the run outlived it: {sorted(left)}"


def test_live_progress_counts_and_shows_failures() -> None:
    import io

    from codemode.batch.models import RepoResult
    from codemode.batch.progress import BatchProgress

    stream = io.StringIO()
    with BatchProgress(3, stream, live=True) as progress:
        for name, ok in [("a", True), ("b[1]", False), ("c", True)]:
            error = None if ok else "Error: [bold]no[/bold]"
            status = "ok" if ok else "failed"
            result = RepoResult(
                repository=f"/r/{name}", status=status, duration_s=0.1, tool_calls=1, error=error
            )
            progress.add(result)
    text = stream.getvalue()
    # Brackets in paths and messages are shown as they are, not read as markup.
    assert "failed /r/b[1]: Error: [bold]no[/bold]" in text
    assert "2 done  1 failed  0 remaining" in text
    assert progress.summary().startswith("3 repositories: 2 done, 1 failed, 0 not run")


def stop_cluster(marker: str) -> None:
    """Kill a test's Ray cluster (``cluster_processes(marker)``) and check, within 10 s,
    that nothing of it is left."""
    for pid in cluster_processes(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while cluster_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster_processes(marker) == set()


def cluster_processes(marker: str) -> set[int]:
    """Pids whose command line or environment names ``marker`` (one cluster's temp
    dir), and their descendants (the agents and workers its raylet started), less this
    process and its own children (the ``interpreter`` the test runs is not Ray)."""
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            environ = b""
        pid = int(entry.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        if marker.encode() in cmdline or marker.encode() in environ:
            found.add(pid)
    found -= {os.getpid()}
    found -= {p for p, parent in parents.items() if parent == os.getpid()}
    while new := {p for p, parent in parents.items() if parent in found} - found:
        found |= new
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_ray_joins_an_existing_cluster(workdir: Path) -> None:
    make_repos(workdir / "repos", 4)
    (workdir / "name.js").write_text("return repo.name\n")
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
        # Every Ray server on 127.0.0.1, its files in a private (short) temp dir, and
        # the token `ray start` makes in ~/.ray under a home of the test's own.
        env.update(
            RAY_TMPDIR=ray_tmp, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", HOME=str(workdir / "home")
        )
        # With a token in ~/.ray (a local ray.init() leaves one), `ray start` turns
        # token authentication on; this test makes sure there is one.
        (workdir / "home" / ".ray").mkdir(parents=True)
        (workdir / "home" / ".ray" / "auth_token").write_text(secrets.token_hex(32))
        head = [
            str(INTERPRETER.parent / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
            "--port=0", "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={ray_tmp}",
            "--object-store-memory=134217728", "--disable-usage-stats",
        ]  # fmt: skip
        try:
            started = subprocess.run(head, env=env, capture_output=True, text=True, timeout=120)
            assert started.returncode == 0, started.stderr
            address = (Path(ray_tmp) / "ray_current_cluster").read_text().strip()
            assert address.startswith("127.0.0.1:"), address
            run = ["run", "name.js", "--repos", "repos", "--backend", "ray", "--ray-address"]
            joined = interp(
                *run, address, "--report", "joined.jsonl", cwd=workdir,
                env={**env, "RAY_AUTH_MODE": "token"},
            )  # fmt: skip
            assert joined.returncode == 0, joined.stderr
            report = read_report(workdir / "joined.jsonl")
            assert sorted(line["value"] for line in report.values()) == [
                f"repo-{i:02d}" for i in range(4)
            ]
            # Ray sends its token only to a cluster it finds by itself, never to a given
            # address: without RAY_AUTH_MODE=token the error says what to do.
            refused = interp(*run, address, "--report", "refused.jsonl", cwd=workdir, env=env)
            assert refused.returncode == 2, refused.stderr
            assert f"cannot start Ray on {address}" in refused.stderr
            assert "set RAY_AUTH_MODE=token" in refused.stderr
        finally:
            stop_cluster(ray_tmp)
