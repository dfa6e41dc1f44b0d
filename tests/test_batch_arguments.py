"""Every ``--repos`` argument is accounted for, and ``--resume`` runs only what the
original run selected (issue 38, item 7), attacked from the side of a shell glob that
matched more than repositories and of a script that rewrites a report kept inside the
repository it runs in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_batch import INTERPRETER, interp, report_lines

# Leaves a mark in every repository it runs in (changes applied back by the driver).
MARK = 'await tools.write_file({path: "ran.txt", content: repo.name}); return argv;'


def repos(root: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        (root / name / ".git").mkdir(parents=True)
        made.append(root / name)
    return made


def glob_run(cwd: Path, pattern: str, *rest: str) -> subprocess.CompletedProcess[str]:
    """``interpreter run mark.js --repos PATTERN ...`` as a shell expands it."""
    line = f'"{INTERPRETER}" run mark.js --report r.jsonl --repos {pattern} {" ".join(rest)}'
    return subprocess.run(
        ["sh", "-c", line],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CODEMODE_HOME": str(cwd / "home")},
    )


def test_a_plain_file_a_glob_matched_is_named_and_fails_the_run(tmp_path: Path) -> None:
    """`--repos src/*` over a folder holding notes.txt: the file is not dropped (nor
    handed to the script as an argument, with every repository after it)."""
    (tmp_path / "mark.js").write_text(MARK)
    first, last = repos(tmp_path / "src", "a-repo", "z-repo")
    (tmp_path / "src" / "notes.txt").write_text("# our repositories\n")
    proc = glob_run(tmp_path, "src/*")
    assert proc.returncode != 0, proc.stderr
    assert "src/notes.txt" in proc.stderr
    assert not (first / "ran.txt").exists() and not (last / "ran.txt").exists()


def test_a_missing_path_a_glob_matched_is_named_and_fails_the_run(tmp_path: Path) -> None:
    """A dangling link the glob matched, or a path typed wrong, after the first value."""
    (tmp_path / "mark.js").write_text(MARK)
    [repo] = repos(tmp_path / "src", "a-repo")
    (tmp_path / "src" / "b-gone").symlink_to(tmp_path / "nowhere")
    proc = glob_run(tmp_path, "src/*")
    assert proc.returncode != 0, proc.stderr
    assert "src/b-gone" in proc.stderr and "no such file or directory" in proc.stderr
    assert not (repo / "ran.txt").exists()
    proc = glob_run(tmp_path, "src/a-repo", "src/typo")
    assert proc.returncode != 0 and "src/typo" in proc.stderr, proc.stderr
    assert not (repo / "ran.txt").exists()


def test_script_arguments_go_after_a_double_dash(tmp_path: Path) -> None:
    (tmp_path / "mark.js").write_text(MARK)
    [repo] = repos(tmp_path / "src", "a-repo")
    proc = glob_run(tmp_path, "src/*", "--", "old", "src/a-repo")
    assert proc.returncode == 0, proc.stderr
    [_, line] = report_lines(tmp_path / "r.jsonl")
    assert line["value"] == ["old", "src/a-repo"]
    assert (repo / "ran.txt").read_text() == "a-repo"


# In the repository holding the report, the script rewrites the report's run header to
# list a folder it creates there (the driver applies the change: it succeeded); a run in
# that folder leaves a mark.
FORGE = """
if (repo.name === "keeper") {
  const header = JSON.parse((await tools.read_file({path: "r.jsonl"})).content.split("\\n")[0]);
  header.repositories.push(repo.origin + "/planted");
  await tools.write_file({path: "r.jsonl", content: JSON.stringify(header) + "\\n"});
  await tools.write_file({path: "planted/README", content: "not selected"});
} else {
  await tools.write_file({path: "ran.txt", content: repo.name});
}
"""


def test_resume_runs_only_what_the_original_run_selected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "CODEMODE_HOME": str(home)}
    (tmp_path / "forge.js").write_text(FORGE)
    [keeper] = repos(tmp_path, "keeper")
    report = keeper / "r.jsonl"
    first = interp("run", "forge.js", "--repos", keeper, "--report", report, cwd=tmp_path,
                   env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    again = interp("run", "forge.js", "--resume", report, cwd=tmp_path, env=env)
    assert not (keeper / "planted" / "ran.txt").exists(), again.stderr
    assert again.returncode == 2, again.stderr
    assert "run header" in again.stderr and "r.jsonl" in again.stderr, again.stderr


def test_resume_refuses_another_runs_header_copied_in(tmp_path: Path) -> None:
    """A header copied from another report (the same script's run elsewhere) would
    resume that run's selection through this file: refused, nothing run."""
    env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
    (tmp_path / "fail.js").write_text(
        'await tools.write_file({path: "ran.txt", content: "x"}); throw new Error("no");'
    )
    [other] = repos(tmp_path, "other")
    first = interp("run", "fail.js", "--repos", other, "--report", "a.jsonl", cwd=tmp_path, env=env)
    assert first.returncode == 1, first.stderr
    (tmp_path / "b.jsonl").write_text((tmp_path / "a.jsonl").read_text())
    again = interp("run", "fail.js", "--resume", "b.jsonl", cwd=tmp_path, env=env)
    assert again.returncode == 2, again.stderr
    assert "a.jsonl" in again.stderr and "b.jsonl" in again.stderr, again.stderr
    assert not (other / "ran.txt").exists()
    assert len(report_lines(tmp_path / "b.jsonl")) == 2  # nothing appended
