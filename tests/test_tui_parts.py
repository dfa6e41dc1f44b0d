"""The interactive session's parts on their own: undo snapshots, @mentions, the config
the first-run wizard writes, streamed markdown splitting, approval display, and the
command line around the session."""

from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from agent_support import run_cli

from codemode.tui.approval import calling_lines, describe_request
from codemode.tui.input import complete_path
from codemode.tui.live_stream import split_committed
from codemode.tui.mentions import MAX_MENTION_BYTES, expand_mentions
from codemode.tui.snapshots import Snapshots
from codemode.tui.wizard import write_provider_choice

# --- snapshots -------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\0" * 10)
    for path in root.rglob("*"):  # made a while ago, as a real checkout is
        os.utime(path, (time.time() - 100, time.time() - 100))
    return root


def test_undo_restores_changed_removed_and_deletes_added_files(tree: Path) -> None:
    snaps = Snapshots(tree)
    try:
        snaps.begin_turn()
        (tree / "src" / "a.py").write_text("a = 2\n")
        (tree / "run.sh").write_text("#!/bin/sh\necho changed\n")
        (tree / "new" / "deep").mkdir(parents=True)
        (tree / "new" / "deep" / "n.txt").write_text("new\n")
        (tree / ".gitignore").unlink()
        changes = snaps.end_turn()
        assert changes is not None
        assert changes.paths() == [".gitignore", "new/deep/n.txt", "run.sh", "src/a.py"]
        result = snaps.undo()
    finally:
        snaps.close()
    assert result is not None
    assert (tree / "src" / "a.py").read_text() == "a = 1\n"
    assert (tree / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert os.access(tree / "run.sh", os.X_OK)  # the mode survives
    assert (tree / ".gitignore").read_text() == "build/\n"
    assert not (tree / "new").exists()  # emptied directories go too
    assert (tree / "build" / "out.bin").exists()  # unignored by the turn, not created by it
    assert sorted(result.removed) == ["new/deep/n.txt"]
    assert not snaps.store.exists()


def test_a_symbolic_link_is_never_read_into_a_snapshot(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not the workspace's\n")
    (tree / "link.txt").symlink_to(outside)  # to a file: the walk yields it
    snaps = Snapshots(tree)
    try:
        snaps.begin_turn()
        outside.write_text("changed outside\n")  # through no path of the workspace
        (tree / "src" / "a.py").write_text("a = 2\n")
        changes = snaps.end_turn()
        stored = sorted(p.read_bytes() for p in snaps.store.iterdir())
    finally:
        snaps.close()
    assert changes is not None and changes.paths() == ["src/a.py"]
    assert not any(b"workspace's" in blob for blob in stored)  # never copied in
    assert (tree / "link.txt").is_symlink()


def test_turns_undo_newest_first_and_quiet_turns_are_not_recorded(tree: Path) -> None:
    snaps = Snapshots(tree)
    try:
        snaps.begin_turn()
        (tree / "src" / "a.py").write_text("a = 2\n")
        assert snaps.end_turn() is not None
        snaps.begin_turn()
        assert snaps.end_turn() is None  # nothing changed
        snaps.begin_turn()
        (tree / "src" / "a.py").write_text("a = 3\n")
        os.utime(tree / "run.sh")  # touched, same content: not a change
        changes = snaps.end_turn()
        assert changes is not None and changes.paths() == ["src/a.py"]
        snaps.undo()
        assert (tree / "src" / "a.py").read_text() == "a = 2\n"
        snaps.undo()
        assert (tree / "src" / "a.py").read_text() == "a = 1\n"
        assert snaps.undo() is None
    finally:
        snaps.close()


def test_ignored_files_are_left_alone_and_big_files_are_reported(tree: Path) -> None:
    (tree / "big.dat").write_bytes(b"x" * 2000)
    snaps = Snapshots(tree, max_file_bytes=1000)
    try:
        snaps.begin_turn()
        (tree / "build" / "out.bin").write_bytes(b"changed")
        (tree / "big.dat").write_bytes(b"y" * 2000)
        changes = snaps.end_turn()
        assert changes is not None
        assert changes.unrestorable == ["big.dat"] and not changes.before
        result = snaps.undo()
    finally:
        snaps.close()
    assert result is not None and result.skipped == ["big.dat"]
    assert (tree / "build" / "out.bin").read_bytes() == b"changed"


def test_too_many_files_turn_snapshots_off(tree: Path) -> None:
    snaps = Snapshots(tree, max_files=2)
    try:
        snaps.prepare()
        snaps.begin_turn()
        (tree / "src" / "a.py").write_text("changed\n")
        assert snaps.end_turn() is None
        assert snaps.undo() is None
        assert snaps.disabled == "the workspace has more than 2 files"
    finally:
        snaps.close()


# --- mentions --------------------------------------------------------------------------


def test_mentions_attach_files_and_report_problems(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    (tmp_path / "huge.txt").write_text("x" * (MAX_MENTION_BYTES + 1))
    text = "look at @src/app.py, and @blob.bin @huge.txt @gone.txt; mail me at a@b.com"
    out = expand_mentions(text, tmp_path)
    assert out.attached == ["src/app.py"]
    assert out.text.startswith(text)
    assert "``` src/app.py\nprint('hi')\n```" in out.text
    problems = " | ".join(out.problems)
    assert "@blob.bin: binary" in problems and "@huge.txt:" in problems
    assert "@gone.txt: not a file" in problems and "b.com" not in problems


def test_a_mentioned_utf16_file_is_attached_as_text(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes("\ufeffhéllo\n".encode("utf-16-le"))
    out = expand_mentions("see @notes.txt", tmp_path)
    assert out.attached == ["notes.txt"] and not out.problems, out.problems
    assert "``` notes.txt\nhéllo\n```" in out.text


def test_message_without_mentions_is_unchanged(tmp_path: Path) -> None:
    out = expand_mentions("just @someone saying hi", tmp_path)
    assert out.text == "just @someone saying hi" and not out.attached and not out.problems


def test_path_completion(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".hidden").write_text("")
    assert complete_path(tmp_path, "s") == ["setup.cfg", "src/"]
    assert complete_path(tmp_path, "src/m") == ["src/main.py"]
    assert complete_path(tmp_path, ".h") == [".hidden"]
    assert complete_path(tmp_path, "nope/x") == []


# --- the wizard's config ---------------------------------------------------------------


def test_wizard_keeps_existing_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "# mine\nmodel = \"old\"\nmax_turns = 9\n\n[model_providers.other]\n"
        'base_url = "http://127.0.0.1:1/v1"  # keep me\n',
        encoding="utf-8",
    )
    write_provider_choice(
        path, "local", "qwen3", {"base_url": "http://127.0.0.1:8000/v1", "wire_api": "chat"}
    )
    text = path.read_text(encoding="utf-8")
    assert "# mine" in text and "# keep me" in text
    data = tomllib.loads(text)
    assert data["model"] == "qwen3" and data["model_provider"] == "local"
    assert data["max_turns"] == 9
    assert data["model_providers"]["other"]["base_url"] == "http://127.0.0.1:1/v1"
    assert data["model_providers"]["local"] == {
        "base_url": "http://127.0.0.1:8000/v1",
        "wire_api": "chat",
    }


def test_wizard_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "home" / "config.toml"
    write_provider_choice(path, "openai", "gpt-5")
    assert tomllib.loads(path.read_text()) == {"model_provider": "openai", "model": "gpt-5"}


# --- rendering and approvals -----------------------------------------------------------


def test_streamed_markdown_is_committed_at_paragraph_breaks_outside_fences() -> None:
    assert split_committed("one\n\ntwo") == ("one\n\n", "two")
    assert split_committed("no break yet") == ("", "no break yet")
    fenced = "intro\n\n```py\na = 1\n\nb = 2\n"
    assert split_committed(fenced) == ("intro\n\n", "```py\na = 1\n\nb = 2\n")
    closed = "```\nx\n```\n\nafter"
    assert split_committed(closed) == ("```\nx\n```\n\n", "after")


def test_approval_shows_the_rule_reason_and_calling_lines() -> None:
    program = "const a = 1;\nawait tools.shell({command: 'git push -f'});\nreturn a;"
    request = SimpleNamespace(
        tool="shell",
        command="git push -f origin main",
        simple_command="git push -f origin main",
        decision="prompt",
        rule='prefix_rule(pattern=["git", "push"], decision="prompt")',
        source="default.rules:95",
        justification="force pushes rewrite history",
        program=program,
    )
    shown = describe_request(request)
    plain = "\n".join(str(getattr(r, "plain", "")) for r in shown)
    assert "git push -f origin main" in plain
    assert "force pushes rewrite history" in plain and "default.rules:95" in plain
    assert "line 2" in plain
    assert calling_lines(program, "shell") == [2]
    assert calling_lines("tools . shell ({})\ntools.shellx()", "shell") == [1]


# --- the command line ------------------------------------------------------------------


def test_options_after_the_prompt_are_refused(tmp_path: Path) -> None:
    run = run_cli(["fix the bug", "--model", "x"], home=tmp_path, cwd=tmp_path)
    assert run.code == 2
    assert "put options before the PROMPT" in run.stderr


def test_resume_without_a_terminal_still_needs_a_prompt(tmp_path: Path) -> None:
    run = run_cli(["resume", "--last"], home=tmp_path, cwd=tmp_path, stdin="")
    assert run.code == 2 and "no prompt given" in run.stderr


async def test_wizard_lists_a_local_servers_models() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from codemode.tui.wizard import list_models

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/v1/models"
            body = json.dumps({"data": [{"id": "qwen3-coder"}, {"id": "llama"}]}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert await list_models(base + "/v1") == ["qwen3-coder", "llama"]
        assert await list_models(base + "/nothing") is None
    finally:
        server.shutdown()
        server.server_close()


def test_path_completion_in_a_flooded_folder_reads_a_bounded_part(tmp_path: Path) -> None:
    """Completion runs at each key, over a folder a command may have filled: it reads
    ``COMPLETION_ENTRIES`` entries at most, so a folder ten times that size costs about
    what that many cost (it listed and sorted all of them)."""
    import time

    from codemode.tui.input import COMPLETION_ENTRIES

    def flood(folder: Path, count: int) -> Path:
        folder.mkdir()
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i in range(count):
                os.symlink("nowhere", f"f{i:07d}", dir_fd=fd)  # (an entry, made fast)
        finally:
            os.close(fd)
        return folder

    small, big = flood(tmp_path / "small", COMPLETION_ENTRIES), flood(
        tmp_path / "big", COMPLETION_ENTRIES * 10
    )

    def cost(folder: Path) -> float:
        times = []
        for _ in range(5):
            started = time.process_time()
            complete_path(folder, "f")
            times.append(time.process_time() - started)
        return sorted(times)[2]

    assert len(complete_path(big, "f")) == 50
    assert cost(big) < 3 * cost(small) + 0.01, (cost(big), cost(small))
