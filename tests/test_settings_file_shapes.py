"""The settings and instructions files a session reads from the workspace when it starts
(a hooks file, ``.claude/settings.json``, a skill's ``SKILL.md``, a rules file, a config
file) may come from a repository or an earlier session's command: a FIFO in the place of
one must not hang the start, nor a link to ``/dev/zero`` exhaust the memory. Each is
then an unreadable file, said as such."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bounded_calls import bounded

from codemode.hooks.discovery import read_file as read_hooks_file
from codemode.locations import small_files
from codemode.locations.config_file import ConfigError, read_config_file
from codemode.sandbox.execpolicy.rules_file import RulesError, load_rules_file
from codemode.skills.discovery import parse_skill_file


def _plant(path: Path, shape: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if shape == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


READERS: dict[str, tuple[str, Callable[[Path], Any], type[BaseException] | None]] = {
    "hooks": (".claude/settings.json", lambda p: read_hooks_file(p, "project"), None),
    "skill": (".agents/skills/x/SKILL.md", parse_skill_file, OSError),
    "rules": (".codemode/rules/x.rules", load_rules_file, RulesError),
    "config": (".codemode/config.toml", read_config_file, ConfigError),
}


@pytest.mark.parametrize("shape", ["fifo", "dev_zero"])
@pytest.mark.parametrize("reader", list(READERS))
def test_a_settings_file_shaped_to_hang_or_flood_is_an_unreadable_file(
    reader: str, shape: str, tmp_path: Path
) -> None:
    rel, read, raises = READERS[reader]
    path = tmp_path / rel
    _plant(path, shape)
    got = bounded(lambda: read(path))
    if raises is None:  # the hooks file: no hooks, and a problem saying why
        hooks, problems = got
        assert hooks == [] and "not a regular file" in problems[0], got
    else:
        assert isinstance(got, raises), got
        assert "not a regular file" in str(got), got


def test_a_file_over_the_cap_is_refused_by_size(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # a terabyte of holes
    with pytest.raises(OSError, match="larger than 1 MiB"):
        small_files.read_text(big)
