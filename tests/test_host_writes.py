"""Writes codemode's own (unconfined) process makes into a repository that a program
shaped: a batch script plants, in its own journal, a symlink at every temporary name the
driver could pick (``.NAME.codemode-<pid>-new`` for every pid up to ``pid_max``) pointing
at a file outside the repository (a stand-in for ``~/.bashrc``). Applying the journal,
plainly or with ``--branch``, must neither write that file nor change its mode, and must
not report the run ``ok``."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from test_batch import interp, read_report

GIT_ID = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]


def _pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text())


# Plants the links with one perl process (a shell loop of `ln -s` would start 32,768
# programs), then writes the file whose temporary name they cover.
PLANT = r"""
const outside = argv[0];
const pidMax = Number(argv[1]);
const planted = await tools.shell({command:
  `perl -e 'for my $i (1..$ARGV[1]) { symlink($ARGV[0], ".x.txt.codemode-$i-new") or die "$i: $!" }' ` +
  `'${outside}' ${pidMax} && ls -A | grep -c '^.x.txt.codemode-'`});
await tools.write_file({path: "x.txt", content: "planted text\n"});
return planted.output.trim();
"""


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "x.txt").write_text("before\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *GIT_ID, *args], cwd=path, check=True, capture_output=True)
    return path


@pytest.mark.parametrize("how", ["apply", "branch"])
def test_a_batch_script_cannot_write_through_links_it_planted(tmp_path: Path, how: str) -> None:
    repo = _repo(tmp_path / "repos" / "r")
    outside = tmp_path / "bashrc"
    outside.write_text("the user's own\n")
    outside.chmod(0o600)
    (tmp_path / "plant.js").write_text(PLANT)
    extra = ["--branch", "planted", "--commit-message", "m"] if how == "branch" else []
    proc = interp(
        "run", "plant.js", "--repos", repo, "--approval", "never", *extra, "--report", "r.jsonl", "--",
        outside, str(_pid_max()), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert outside.read_text() == "the user's own\n", line
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
    # The script did plant every name (so the driver's was among them) ...
    assert line.get("value") == str(_pid_max()), line
    # ... and the run says the repository was refused, untouched.
    assert line["status"] == "failed" and line["error_kind"] in ("apply", "publish"), line
    assert "leads outside the repository" in line["error"], line
    assert proc.returncode == 1, proc.stderr
    assert (repo / "x.txt").read_text() == "before\n"
    assert not [p for p in os.listdir(repo) if "codemode" in p]
