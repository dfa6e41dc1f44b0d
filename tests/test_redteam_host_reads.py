"""Files codemode's own process reads that a confined command (or a hostile repository)
may have shaped, outside the file tools' own reads: an ``@file`` mention, the text a
whole-file write replaces (shown as a diff), a skill's ``.js`` helper, the
``--output-schema`` file.

Each is put in the place of a FIFO (a plain open waits for a writer for good: the
session hangs), a link to ``/dev/zero`` or a sparse file of a terabyte (read until memory
runs out), or a link to ``/proc/self/environ`` (the process's keys, handed to the model
or the screen). Real files, FIFOs and links; a read that could hang runs in a thread
with a deadline (``bounded``)."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from bounded_calls import bounded
from rich.console import Console

from codemode.agent.events import ItemCompleted, ItemStarted, ToolCallItem
from codemode.agent.output_schema import SchemaProblem, load_schema
from codemode.skills.discovery import discover_skills
from codemode.skills.tool import LoadSkillArgs, skill_tool
from codemode.tools.base import ToolContext, ToolError
from codemode.tools.builtin import builtin_registry
from codemode.tui.mentions import MAX_MENTION_BYTES, expand_mentions
from codemode.tui.render import TerminalRenderer

# A value of this process's environment as it started (what /proc/self/environ holds).
_ENV_LINE = next(
    line for line in Path("/proc/self/environ").read_bytes().split(b"\0") if b"=" in line
).decode("utf-8", "replace")
_ENV_VALUE = _ENV_LINE.split("=", 1)[1] or _ENV_LINE


@pytest.fixture
def fifos() -> Iterator[list[Path]]:
    """FIFOs a test made: on the way out each gets a writer, so a read the old code left
    waiting in a thread ends instead of holding the test process."""
    made: list[Path] = []
    yield made
    for fifo in made:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:  # nobody waiting: nothing to release
            assert exc.errno in (errno.ENXIO, errno.ENOENT), exc


def _fifo(path: Path, made: list[Path]) -> Path:
    os.mkfifo(path)
    made.append(path)
    return path


def _sparse(path: Path, size: int = 1 << 40) -> Path:
    with open(path, "wb") as f:
        f.write(b"start\n")
        f.truncate(size)
    return path


# --- @file mentions --------------------------------------------------------------------


def _mention(ws: Path, name: str) -> tuple[list[str], list[str], str]:
    out = bounded(lambda: expand_mentions(f"look at @{name} please", ws))
    assert not isinstance(out, BaseException), out
    return out.attached, out.problems, out.text


def test_a_mention_of_a_link_to_this_processs_environment_attaches_nothing(
    tmp_path: Path,
) -> None:
    """``/proc/self/environ`` is a regular file: attached, it would put the session's
    keys in the message to the model."""
    (tmp_path / "notes.md").symlink_to("/proc/self/environ")
    attached, problems, text = _mention(tmp_path, "notes.md")
    assert attached == [] and _ENV_VALUE not in text
    assert any(p.startswith("@notes.md:") for p in problems), problems


def test_a_mention_of_a_fifo_does_not_wait_for_a_writer(tmp_path: Path, fifos: list[Path]) -> None:
    _fifo(tmp_path / "notes.md", fifos)
    attached, problems, _ = _mention(tmp_path, "notes.md")
    assert attached == [] and problems == ["@notes.md: not a file"]


def test_a_mention_of_a_link_to_dev_zero_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "notes.md").symlink_to("/dev/zero")
    attached, problems, _ = _mention(tmp_path, "notes.md")
    assert attached == [] and problems == ["@notes.md: not a file"]


def test_a_mention_of_a_huge_sparse_file_reads_no_more_than_the_cap(tmp_path: Path) -> None:
    _sparse(tmp_path / "notes.md")
    attached, problems, _ = _mention(tmp_path, "notes.md")
    assert attached == [] and problems == [f"@notes.md: over {MAX_MENTION_BYTES} bytes"]


def test_a_mention_of_a_link_loop_is_reported_not_raised(tmp_path: Path) -> None:
    """(``Path.resolve`` raised RuntimeError on a loop, out of the message's sending.)"""
    (tmp_path / "notes.md").symlink_to("notes.md")
    attached, problems, _ = _mention(tmp_path, "notes.md")
    assert attached == [] and len(problems) == 1 and problems[0].startswith("@notes.md: ")


def test_a_mentioned_file_still_attaches_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("the notes\n")
    (tmp_path / "notes.md").symlink_to("real.md")
    attached, problems, text = _mention(tmp_path, "notes.md")
    assert attached == ["notes.md"] and not problems and "the notes\n" in text


# --- the text a whole-file write replaces (the TUI's diff) -------------------------------


def _write_shown(ws: Path, name: str) -> str:
    """What the terminal shows for a completed ``write_file`` of ``name``."""
    out = StringIO()
    renderer = TerminalRenderer(Console(file=out, width=200), workspace=ws)
    renderer.tools = builtin_registry()
    args = {"path": name, "content": "new text\n"}
    started = ToolCallItem(id="w1", name="write_file", arguments=args)
    done = ToolCallItem(id="w1", name="write_file", arguments=args, status="completed")

    def show() -> None:
        renderer(ItemStarted(item=started))
        renderer(ItemCompleted(item=done))

    failed = bounded(show)
    assert failed is None, failed
    return out.getvalue()


def test_a_write_over_a_link_to_the_environment_does_not_show_it(tmp_path: Path) -> None:
    (tmp_path / "out.txt").symlink_to("/proc/self/environ")
    shown = _write_shown(tmp_path, "out.txt")
    assert _ENV_VALUE not in shown and "new text" in shown


def test_a_write_over_a_fifo_does_not_wait_for_a_writer(tmp_path: Path, fifos: list[Path]) -> None:
    _fifo(tmp_path / "out.txt", fifos)
    assert "out.txt" in _write_shown(tmp_path, "out.txt")


def test_a_write_over_a_huge_sparse_file_reads_no_more_than_the_cap(tmp_path: Path) -> None:
    _sparse(tmp_path / "out.txt")
    assert "out.txt" in _write_shown(tmp_path, "out.txt")


def test_a_write_over_an_ordinary_file_still_shows_its_diff(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("old text\n")
    shown = _write_shown(tmp_path, "out.txt")
    assert "M out.txt" in shown and "-old text" in shown and "+new text" in shown


# --- a skill's .js helper (load_skill) ---------------------------------------------------


def _skill(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "tidy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: tidy\ndescription: Tidies.\n---\nTidy up.\n")
    (folder / "fine.js").write_text("export const x = 1;\n")
    return folder


def _load_helper(tmp_path: Path, helper: str) -> object:
    skills = discover_skills(tmp_path / "ws", user_dir=tmp_path / "skills")
    tool = skill_tool(skills)
    ctx = ToolContext(workspace=tmp_path / "ws")
    args = LoadSkillArgs(name="tidy", helper=helper)
    return bounded(lambda: asyncio.run(tool.handler(args, ctx)))


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return _skill(tmp_path)


def test_a_helper_linked_to_the_environment_is_not_handed_to_the_model(
    tmp_path: Path, skill: Path
) -> None:
    (skill / "leak.js").symlink_to("/proc/self/environ")
    got = _load_helper(tmp_path, "leak")
    assert isinstance(got, ToolError), got
    assert "leak.js" in str(got) and _ENV_VALUE not in str(got)


def test_a_helper_that_is_a_fifo_is_refused_at_once(
    tmp_path: Path, skill: Path, fifos: list[Path]
) -> None:
    _fifo(skill / "wait.js", fifos)
    got = _load_helper(tmp_path, "wait")
    assert isinstance(got, ToolError) and "not a regular file" in str(got), got


def test_a_helper_linked_to_dev_zero_is_refused(tmp_path: Path, skill: Path) -> None:
    (skill / "zero.js").symlink_to("/dev/zero")
    got = _load_helper(tmp_path, "zero")
    assert isinstance(got, ToolError) and "not a regular file" in str(got), got


def test_a_helper_swapped_for_a_sparse_file_is_refused(tmp_path: Path, skill: Path) -> None:
    _sparse(skill / "big.js")
    got = _load_helper(tmp_path, "big")
    assert isinstance(got, ToolError) and "big.js" in str(got), got


def test_skill_instructions_swapped_for_a_fifo_are_a_tool_error(
    tmp_path: Path, skill: Path, fifos: list[Path]
) -> None:
    skills = discover_skills(tmp_path / "ws", user_dir=tmp_path / "skills")
    (skill / "SKILL.md").unlink()  # after discovery: a command of the session did it
    _fifo(skill / "SKILL.md", fifos)
    tool = skill_tool(skills)
    ctx = ToolContext(workspace=tmp_path / "ws")
    got = bounded(lambda: asyncio.run(tool.handler(LoadSkillArgs(name="tidy"), ctx)))
    assert isinstance(got, ToolError) and "not a regular file" in str(got), got


def test_an_ordinary_helper_still_loads(tmp_path: Path, skill: Path) -> None:
    got = _load_helper(tmp_path, "fine")
    assert getattr(got, "source", None) == "export const x = 1;\n", got


# --- --output-schema FILE ----------------------------------------------------------------


def _schema(path: Path) -> object:
    return bounded(lambda: load_schema(path))


def test_an_output_schema_that_is_a_fifo_is_refused_at_once(
    tmp_path: Path, fifos: list[Path]
) -> None:
    got = _schema(_fifo(tmp_path / "schema.json", fifos))
    assert isinstance(got, SchemaProblem) and "not a regular file" in str(got), got


def test_an_output_schema_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "schema.json").symlink_to("/dev/zero")
    got = _schema(tmp_path / "schema.json")
    assert isinstance(got, SchemaProblem) and "not a regular file" in str(got), got


def test_a_huge_sparse_output_schema_is_refused_by_size(tmp_path: Path) -> None:
    got = _schema(_sparse(tmp_path / "schema.json"))
    assert isinstance(got, SchemaProblem) and "larger than" in str(got), got


def test_an_ordinary_output_schema_still_loads(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text('{"type": "object"}')
    assert _schema(tmp_path / "schema.json") == {"type": "object"}
