"""The patch engine: the scenario suite, properties, every surface (tool, code mode, shell
interception, CLI), and the all-or-nothing guarantee with real failing writes."""

from __future__ import annotations

import difflib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from codemode import ToolHost
from codemode.tools import ToolContext, ToolError, builtin_registry
from codemode.tools.apply_patch import APPLY_PATCH
from codemode.tools.patch import PatchError, apply_patch_text
from codemode.tools.patch.intercept import match_shell_patch
from codemode.tools.patch.lenient import unwrap
from codemode.tools.patch.lexer import canonical_text, lex
from codemode.tools.patch.parser import grammar_text, parse_canonical, parse_patch
from codemode.tools.patch.unified import looks_unified
from codemode.tools.typescript import typescript_declarations

SCENARIOS = Path(__file__).parent / "patch_scenarios"
INTERPRETER = Path(sys.executable).parent / "interpreter"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes; ``.keep`` files only hold directories
    open in git and are left out."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".keep"
    }


def workspace_from(case: Path, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    if (case / "input").is_dir():
        shutil.copytree(case / "input", ws, dirs_exist_ok=True)
    return ws


# --- the scenario suite ------------------------------------------------------------------
#
# Each directory under tests/patch_scenarios holds input/ (the files before), patch.txt
# (as a model sent it) and either expected/ (the files after, byte for byte; a .keep
# file there means its directory must exist) or expected_error.txt (every non-empty
# line must appear in the error, and no file may have changed).

CASES = sorted(p for p in SCENARIOS.iterdir() if p.is_dir())


def test_scenarios_are_well_formed() -> None:
    assert len(CASES) >= 50
    for case in CASES:
        assert (case / "patch.txt").is_file(), case.name
        assert (case / "expected").is_dir() != (case / "expected_error.txt").is_file(), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scenario(case: Path, tmp_path: Path) -> None:
    ws = workspace_from(case, tmp_path)
    before = snapshot(ws)
    patch = (case / "patch.txt").read_bytes().decode("utf-8")
    error_file = case / "expected_error.txt"
    if error_file.is_file():
        with pytest.raises(PatchError) as info:
            apply_patch_text(patch, ws)
        message = str(info.value)
        assert message.startswith("apply_patch: the patch was not applied; no file was changed.")
        for line in error_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                assert line in message, f"{line!r} missing from:\n{message}"
        assert snapshot(ws) == before, "a failed patch changed files"
        assert not list(ws.rglob(".apply_patch-*")), "temporary files left behind"
        return
    outcome = apply_patch_text(patch, ws)
    assert snapshot(ws) == snapshot(case / "expected")
    for keep in (case / "expected").rglob(".keep"):
        assert (ws / keep.parent.relative_to(case / "expected")).is_dir()
    assert outcome.changes, "a successful patch reports its changes"
    assert not list(ws.rglob(".apply_patch-*"))


def test_absolute_path_outside_was_not_created() -> None:
    # Scenario 047 tries to write here; it must never exist.
    assert not Path("/tmp/codemode-apply-patch-outside").exists()


# --- the grammar of record ---------------------------------------------------------------


def _shape(patch: Any) -> Any:
    """A parsed patch without line numbers (lark's own lexer numbers canonical lines)."""
    data = asdict(patch)
    for op in data["operations"]:
        op.pop("line")
        for chunk in op.get("chunks", []):
            chunk.pop("line")
    return data


def _parses_as_apply_patch(case: Path) -> bool:
    """Scenarios in the apply_patch format that parse (rejected ones have no canonical
    form, and unified diffs have their own reader)."""
    lines = unwrap((case / "patch.txt").read_bytes().decode("utf-8")).lines
    if looks_unified(lines):
        return False
    try:
        lex(lines)
    except PatchError:
        return False
    return True


CANONICAL = [c for c in CASES if _parses_as_apply_patch(c)]


def test_most_scenarios_have_a_canonical_form() -> None:
    assert len(CANONICAL) >= 45


@pytest.mark.parametrize("case", CANONICAL, ids=[c.name for c in CANONICAL])
def test_line_lexer_agrees_with_the_grammar(case: Path) -> None:
    """What the lenient line lexer makes of a patch is canonical text that lark parses,
    with the grammar's own terminals, into the same patch."""
    text = (case / "patch.txt").read_bytes().decode("utf-8")
    wrapped = unwrap(text)
    tokens = lex(wrapped.lines, wrapped.first_line)
    try:
        patch, _ = parse_patch(text)
    except PatchError:
        # The line lexer accepted it, so lark must reject the canonical text as well.
        with pytest.raises(PatchError):
            parse_canonical(canonical_text(tokens))
        return
    assert _shape(parse_canonical(canonical_text(tokens))) == _shape(patch)


def test_grammar_rejects_non_canonical_text() -> None:
    with pytest.raises(PatchError):
        parse_canonical("*** Begin Patch\n*** Update File: a\nno prefix\n*** End Patch\n")
    with pytest.raises(PatchError):
        parse_canonical("*** Begin Patch\n*** End Patch\n")


def test_tool_carries_the_grammar_and_a_freeform_field() -> None:
    assert APPLY_PATCH.grammar == grammar_text()
    assert "start:" in APPLY_PATCH.grammar
    assert APPLY_PATCH.freeform_field == "input"
    assert APPLY_PATCH.validate("*** Begin Patch").input == "*** Begin Patch"  # type: ignore[attr-defined]
    with pytest.raises(ToolError, match='"input" is required'):
        APPLY_PATCH.validate({})
    description = APPLY_PATCH.description
    for marker in ("*** Begin Patch", "*** Update File:", "*** Add File:", "@@", "*** Move to:"):
        assert marker in description


# --- property: a patch made from A to B turns A into B -----------------------------------

_POOL = ["", "  ", "x", "y = 1", "    return x", "}", "*** End Patch", "@@ a", "+", "-", "é ✓"]
_line = st.one_of(
    st.sampled_from(_POOL),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\ufeff\x00"),
        max_size=8,
    ).filter(lambda t: not t[:1].isspace()),
)
_lines = st.lists(_line, max_size=25)


def make_codex_patch(a_keys: list[str], b_keys: list[str], path: str) -> str | None:
    """An apply_patch patch from A to B whose every chunk is found where it belongs:
    a chunk that could match earlier is widened back to where the previous one ended."""
    matcher = difflib.SequenceMatcher(None, a_keys, b_keys, autojunk=False)
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    cursor = 0
    groups = list(matcher.get_grouped_opcodes(3))
    if not groups:
        return None
    for group in groups:
        start, stop = group[0][1], group[-1][2]
        ops: list[tuple[str, str]] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                ops += [(" ", k) for k in a_keys[a1:a2]]
            else:
                ops += [("-", k) for k in a_keys[a1:a2]] + [("+", k) for k in b_keys[b1:b2]]
        pattern = [k for op, k in ops if op != "+"]
        if not pattern or _first_at(a_keys, pattern, cursor) != start:
            ops = [(" ", k) for k in a_keys[cursor:start]] + ops
            start = cursor
        if not any(op != "+" for op, _ in ops) and stop < len(a_keys):
            ops.append((" ", a_keys[stop]))
            stop += 1
        out.append("@@")
        out += [op + k for op, k in ops]
        cursor = stop
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


def _first_at(keys: list[str], pattern: list[str], start: int) -> int | None:
    for i in range(start, len(keys) - len(pattern) + 1):
        if keys[i : i + len(pattern)] == pattern:
            return i
    return None


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(a=_lines, b=_lines, eol=st.sampled_from(["\n", "\r\n"]), final_newline=st.booleans())
def test_generated_patch_turns_a_into_b(
    tmp_path: Path, a: list[str], b: list[str], eol: str, final_newline: bool
) -> None:
    a_text = "".join(k + eol for k in a)
    if a and a[-1] and not final_newline:
        a_text = a_text[: -len(eol)]  # (an empty last line has nothing left without its eol)
    patch = make_codex_patch(a, b, "f.txt")
    assume(patch is not None)
    assert patch is not None
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    (ws / "f.txt").write_bytes(a_text.encode("utf-8"))
    outcome = apply_patch_text(patch, ws)
    # Added lines take their neighbours' ending; a file with no line ending yet gets "\n".
    a_lines = a_text.split("\n")
    out_eol = eol if len(a_lines) > 1 else "\n"
    expected = "".join(k + out_eol for k in b)
    assert (ws / "f.txt").read_bytes().decode("utf-8") == expected
    # The diff it reports, read back as a unified diff, makes the same change.
    (ws / "f.txt").write_bytes(a_text.encode("utf-8"))
    apply_patch_text(outcome.diff, ws)
    assert (ws / "f.txt").read_bytes().decode("utf-8") == expected


def test_diff_of_a_file_with_lone_carriage_returns(tmp_path: Path) -> None:
    """A line a lone CR ends is a whole line in the diff, not a last line without a
    newline."""
    (tmp_path / "m.txt").write_bytes(b"one\r\ntwo\rthree\nfour\r\n")
    patch = ("*** Begin Patch\n*** Update File: m.txt\n@@\n two\n-three\n+THREE\n four\n"
             "*** End Patch\n")
    outcome = apply_patch_text(patch, tmp_path)
    assert (tmp_path / "m.txt").read_bytes() == b"one\r\ntwo\rTHREE\r\nfour\r\n"
    assert "No newline" not in outcome.diff
    assert outcome.diff.endswith(" one\n two\n-three\n+THREE\n four\n")


def test_reported_diff_is_accepted_by_git_apply(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    (ws / "gone.txt").write_text("bye\n")
    (ws / "tail.txt").write_text("no newline")
    pristine = tmp_path / "pristine"
    shutil.copytree(ws, pristine)
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n line 2\n-line 3\n+LINE 3\n line 4\n"
        "@@\n line 25\n+inserted\n line 26\n*** Add File: new/b.txt\n+b1\n+b2\n"
        "*** Delete File: gone.txt\n*** Update File: tail.txt\n@@\n no newline\n+more\n"
        "*** End Patch\n"
    )
    outcome = apply_patch_text(patch, ws)
    (tmp_path / "out.diff").write_text(outcome.diff)
    proc = subprocess.run(
        [git, "apply", "--unsafe-paths", str(tmp_path / "out.diff")],
        cwd=pristine,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert snapshot(pristine) == snapshot(ws)


# --- all or nothing, with a write that really fails ---------------------------------------


# Run in a child process whose file size limit (RLIMIT_FSIZE) lets small writes through
# and makes the big one fail with EFBIG, a real write failure even for root.
_LIMITED_APPLY = """
import resource, signal, sys
from codemode.tools.patch import PatchError, apply_patch_text
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    apply_patch_text(sys.stdin.read(), sys.argv[1])
except PatchError as exc:
    print(exc)
    sys.exit(1)
"""


def test_failed_write_midway_rolls_back_everything(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    (ws / "gone.txt").write_text("keep me\n")
    before = snapshot(ws)
    big = "".join(f"+line {i} of a file too big for the limit\n" for i in range(400))
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n"
        "*** Delete File: gone.txt\n*** Add File: fresh/dir/new.txt\n+new\n"
        "*** Update File: b.txt\n*** Move to: moved/b.txt\n@@\n-two\n+TWO\n"
        f"*** Add File: fresh/big.txt\n{big}*** End Patch\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", _LIMITED_APPLY, str(ws)],
        input=patch,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Writing fresh/big.txt failed: File too large." in proc.stdout
    assert "The files already written were restored." in proc.stdout
    assert snapshot(ws) == before
    assert not (ws / "fresh").exists(), "directories created for the patch remain"
    assert not (ws / "moved").exists()
    assert not list(ws.rglob(".apply_patch-*"))
    # Without the limit the same patch applies.
    apply_patch_text(patch, ws)
    assert (ws / "moved" / "b.txt").read_text() == "TWO\n"


def test_unwritable_name_is_refused_before_writing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    too_long = "n" * 300 + ".txt"
    with pytest.raises(PatchError, match="File name too long"):
        apply_patch_text(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n"
            f"*** Add File: {too_long}\n+x\n*** End Patch\n",
            tmp_path,
        )
    assert (tmp_path / "a.txt").read_text() == "one\n"


def test_permissions_kept_and_symlinks_written_through(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o755)
    (tmp_path / "real.txt").write_text("target\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    patch = (
        "*** Begin Patch\n*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo one\n"
        "+echo two\n*** Update File: link.txt\n@@\n-target\n+changed\n*** End Patch\n"
    )
    apply_patch_text(patch, tmp_path)
    moved = tmp_path / "bin" / "run.sh"
    assert moved.read_text() == "echo two\n"
    assert stat.S_IMODE(moved.stat().st_mode) == 0o755
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "changed\n"


def test_symlink_leaving_the_workspace_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link.txt").symlink_to(outside)
    with pytest.raises(PatchError, match="outside the workspace"):
        apply_patch_text("*** Begin Patch\n*** Update File: link.txt\n@@\n-secret\n+x\n", ws)
    assert outside.read_text() == "secret\n"


# --- errors written for a model to retry --------------------------------------------------


def test_mismatch_error_names_file_chunk_expected_and_closest(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "".join(f"# filler {i}\n" for i in range(40))
        + "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"
    )
    patch = (
        "*** Begin Patch\n*** Update File: m.py\n@@ def area(w, h):\n     return w * h\n"
        "@@ def perimeter(w, h):\n-    return 2 * (w+h)\n+    return 2 * w + 2 * h\n*** End Patch\n"
    )
    with pytest.raises(PatchError) as info:
        apply_patch_text(patch, tmp_path)
    message = str(info.value)
    assert (
        "m.py, chunk 2 (patch line 5): these lines were not found after line 45 "
        "('@@ def perimeter(w, h):'):\n    |     return 2 * (w+h)\n"
        "The closest text in the file, line 46:\n   46 |     return 2 * (w + h)\n"
    ) in message
    assert "chunk 1" not in message


def test_missing_anchor_error_suggests_similar_lines(tmp_path: Path) -> None:
    (tmp_path / "c.py").write_text("class Shape:\n    def area(self):\n        return 0\n")
    patch = (
        "*** Begin Patch\n*** Update File: c.py\n@@ def aera(self):\n"
        "-        return 0\n+        return 1\n"
    )
    with pytest.raises(PatchError) as info:
        apply_patch_text(patch, tmp_path)
    message = str(info.value)
    assert "c.py, chunk 1 (patch line 3): the '@@ def aera(self):' line was not found" in message
    assert "    2 |     def area(self):" in message


def test_parse_errors_say_where_and_show_the_format(tmp_path: Path) -> None:
    cases = {
        "*** Begin Patch\n*** Add File: a.txt\n+a\nplain text\n*** End Patch\n": (
            "Line 4 of the patch: 'plain text' is inside '*** Add File: a.txt'"
        ),
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n*** End of File\n-b\n*** End Patch\n": (
            "Line 6 of the patch: after '*** End of File' a new chunk must start with an '@@' line."
        ),
        "*** Begin Patch\n*** Delete File: a.txt\n*** Move to: b.txt\n*** End Patch\n": (
            "Line 3 of the patch: '*** Move to: b.txt' must come right after its"
        ),
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n@@ x\n*** End Patch\n": (
            "the '@@ x' line at line 6 is not followed by any ' ', '-' or '+' line."
        ),
        "*** Begin Patch\n*** Add File:\n+a\n*** End Patch\n": "'*** Add File:' names no path.",
    }
    for patch, expected in cases.items():
        with pytest.raises(PatchError) as info:
            apply_patch_text(patch, tmp_path)
        assert expected in str(info.value), str(info.value)
        assert "The apply_patch format:" in str(info.value)
    assert list(tmp_path.iterdir()) == []


# --- surfaces ----------------------------------------------------------------------------


async def test_tool_through_the_registry(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    registry = builtin_registry()
    assert registry.names()[:2] == ["shell", "apply_patch"]
    ctx = ToolContext(workspace=tmp_path)
    patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch"
    result = await registry.invoke("apply_patch", {"input": patch}, ctx)
    assert result["changes"] == [{"path": "a.txt", "kind": "move", "move_to": "b.txt"}]
    assert result["diff"] == "--- a/a.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n"
    with pytest.raises(ToolError) as info:
        await registry.invoke("apply_patch", "*** Begin Patch\n*** Delete File: a.txt\n", ctx)
    assert "no file was changed" in str(info.value)
    assert (tmp_path / "b.txt").read_text() == "y\n"


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
async def test_code_mode_string_and_object_forms(engine: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    host = ToolHost(tmp_path, engine=engine)
    try:
        result = await host.execute(
            "const r = await tools.apply_patch("
            '"*** Begin Patch\\n*** Update File: a.txt\\n@@\\n-x\\n+y\\n*** End Patch\\n");\n'
            "const s = await tools.apply_patch({input: "
            '"*** Begin Patch\\n*** Add File: b.txt\\n+b\\n*** End Patch\\n"});\n'
            "let failure = null;\n"
            "try { await tools.apply_patch('*** Begin Patch\\n*** Delete File: nope\\n'); }\n"
            "catch (e) { failure = e.message; }\n"
            "return {changes: [...r.changes, ...s.changes], diff: r.diff, failure};"
        )
    finally:
        host.close()
    assert result.error is None, result.error
    value = result.value
    assert value["changes"] == [
        {"path": "a.txt", "kind": "update", "move_to": None},
        {"path": "b.txt", "kind": "add", "move_to": None},
    ]
    assert "-x\n+y\n" in value["diff"]
    assert "'*** Delete File: nope': no such file." in value["failure"]
    assert (tmp_path / "a.txt").read_text() == "y\n"
    assert (tmp_path / "b.txt").read_text() == "b\n"


def test_typescript_declaration_accepts_a_string() -> None:
    dts = typescript_declarations(builtin_registry())
    assert "apply_patch(args: string | ApplyPatchArgs): Promise<ApplyPatchResult>;" in dts
    assert 'kind: "add" | "update" | "delete" | "move";' in dts


SHELL_PATCH = (
    "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** Add File: n.txt\n+n\n*** End Patch"
)


async def test_shell_heredoc_is_applied_by_the_engine(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    ctx = ToolContext(workspace=tmp_path)
    registry = builtin_registry()
    r = await registry.invoke(
        "shell", {"command": f"apply_patch <<'EOF'\n{SHELL_PATCH}\nEOF\n"}, ctx
    )
    assert (r["exit_code"], r["output"]) == (0, "M a.txt\nA n.txt\n")
    assert (tmp_path / "a.txt").read_text() == "y\n"
    r = await registry.invoke("shell", {"command": f"apply_patch <<'EOF'\n{SHELL_PATCH}\nEOF"}, ctx)
    assert r["exit_code"] == 1
    assert "a.txt, chunk 1 (patch line 3): these lines were not found" in r["output"]
    assert (tmp_path / "n.txt").read_text() == "n\n"


async def test_shell_cd_heredoc_and_workdir(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "a.txt").write_text("x\n")
    ctx = ToolContext(workspace=tmp_path)
    registry = builtin_registry()
    command = f'cd sub && apply_patch <<"EOF"\n{SHELL_PATCH}\nEOF\n'
    r = await registry.invoke("shell", {"command": command, "workdir": "pkg"}, ctx)
    assert (r["exit_code"], r["output"]) == (0, "M a.txt\nA n.txt\n")
    assert (tmp_path / "pkg" / "sub" / "n.txt").read_text() == "n\n"
    r = await registry.invoke("shell", {"command": command.replace("sub", "missing")}, ctx)
    assert r["exit_code"] == 1
    assert "missing" in r["output"]


async def test_shell_commands_that_only_mention_apply_patch_run_normally(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path)
    r = await builtin_registry().invoke(
        "shell", {"command": "echo apply_patch is not a program here"}, ctx
    )
    assert (r["exit_code"], r["output"]) == (0, "apply_patch is not a program here\n")


def test_match_shell_patch_forms() -> None:
    body = "*** Begin Patch\n*** Delete File: a\n*** End Patch"
    assert match_shell_patch(f"apply_patch <<'EOF'\n{body}\nEOF") == (None, body + "\n")
    assert match_shell_patch(f"applypatch <<EOF\n{body}\nEOF\n") == (None, body + "\n")
    assert match_shell_patch(f"  cd 'my dir' && apply_patch << \"P\"\n{body}\n  P\n") == (
        "my dir",
        body + "\n",
    )
    assert match_shell_patch(f"apply_patch <<'EOF'\n{body}\n") == (None, body + "\n\n")
    assert match_shell_patch(f"apply_patch '{body}'") == (None, body)
    assert match_shell_patch(f"cd src && apply_patch '{body}'") == ("src", body)
    # Anything more than applying the patch runs in the shell as written.
    assert match_shell_patch(f"apply_patch <<'EOF'\n{body}\nEOF\ngit diff\n") is None
    assert match_shell_patch("apply_patch --help") is None
    assert match_shell_patch("git apply_patch <<EOF\nx\nEOF") is None
    assert match_shell_patch("echo apply_patch") is None


def test_paths_are_relative_to_cwd_and_confined_to_writable_roots(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    extra = tmp_path / "extra"
    (ws / "sub").mkdir(parents=True)
    extra.mkdir()
    ctx = ToolContext(workspace=ws, writable_roots=[extra])
    outcome = apply_patch_text(
        f"*** Begin Patch\n*** Add File: here.txt\n+h\n*** Add File: {extra}/x.txt\n+x\n",
        ws / "sub",
        ctx,
    )
    assert [c.path for c in outcome.changes] == ["here.txt", str(extra / "x.txt")]
    assert (ws / "sub" / "here.txt").read_text() == "h\n"
    assert (extra / "x.txt").read_text() == "x\n"
    with pytest.raises(PatchError, match=r"'\*\*\* Add File: \.\./\.\./y.txt' is outside"):
        apply_patch_text("*** Begin Patch\n*** Add File: ../../y.txt\n+y\n", ws / "sub", ctx)


# --- the CLI -----------------------------------------------------------------------------


def interp(*args: str | Path, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(INTERPRETER), *map(str, args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_apply_patch(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("x\n")
    (ws / "old.txt").write_text("o\n")
    (ws / "gone.txt").write_text("g\n")
    patch_file = tmp_path / "change.patch"
    patch_file.write_text(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** Add File: new.txt\n+n\n"
        "*** Delete File: gone.txt\n*** Update File: old.txt\n*** Move to: moved.txt\n@@\n-o\n+m\n"
        "*** End Patch\n"
    )
    proc = interp("apply-patch", patch_file, "--cwd", ws, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "M a.txt\nA new.txt\nD gone.txt\nR old.txt -> moved.txt\n"
    assert snapshot(ws) == {"a.txt": b"y\n", "moved.txt": b"m\n", "new.txt": b"n\n"}

    before = snapshot(ws)
    bad = "*** Begin Patch\n*** Update File: a.txt\n@@\n-y\n+z\n*** Delete File: nope.txt\n"
    proc = interp("apply-patch", "-", cwd=ws, input=bad)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "'*** Delete File: nope.txt': no such file." in proc.stderr
    assert snapshot(ws) == before

    proc = interp("apply-patch", cwd=ws, input="*** Begin Patch\n*** Add File: s.txt\n+s\n")
    assert (proc.returncode, proc.stdout) == (0, "A s.txt\n")

    proc = interp("apply-patch", tmp_path / "missing.patch", cwd=ws)
    assert proc.returncode == 1
    assert "cannot read" in proc.stderr


def test_help_and_the_shell_tool_do_not_import_lark(tmp_path: Path) -> None:
    code = (
        "import sys\nimport codemode.cli\n"
        "for argv in (['--help'], ['apply-patch', '--help']):\n"
        "    try:\n        codemode.cli.main(argv)\n    except SystemExit:\n        pass\n"
        "import codemode.tools.shell, codemode.tools.patch.intercept\n"
        "print('LARK', sorted(m for m in sys.modules if m.split('.')[0] == 'lark'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert "apply-patch" in proc.stdout
    assert "--cwd" in proc.stdout
    assert "LARK []" in proc.stdout


def test_engine_runs_without_a_tool_context(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"a\r\nb\r\n")
    outcome = apply_patch_text("*** Begin Patch\n*** Update File: f.txt\n@@\n a\n+c\n", tmp_path)
    assert outcome.summary() == "M f.txt\n"
    assert (tmp_path / "f.txt").read_bytes() == b"a\r\nc\r\nb\r\n"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_non_utf8_and_binary_content_is_reported_printably(tmp_path: Path) -> None:
    # A file that is not UTF-8 is patched as Latin-1, as read_file shows it: "café".
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\nold\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\xff")
    outcome = apply_patch_text(
        "*** Begin Patch\n*** Update File: latin.txt\n@@\n caf\u00e9\n-old\n+new \u00e9\n"
        "*** Delete File: blob.bin\n*** End Patch\n",
        tmp_path,
    )
    assert (tmp_path / "latin.txt").read_bytes() == b"caf\xe9\nnew \xe9\n"
    assert " caf\u00e9\n-old\n+new \u00e9\n" in outcome.diff
    assert "Binary files a/blob.bin and /dev/null differ\n" in outcome.diff
    outcome.diff.encode("utf-8")  # no lone surrogates left
    # A patch read from bytes (the apply-patch command) holds the raw byte as a
    # surrogate escape: it matches, and is written back as that byte.
    apply_patch_text(
        "*** Begin Patch\n*** Update File: latin.txt\n@@\n caf\udce9\n-new \xe9\n+x\udce9\n",
        tmp_path,
    )
    assert (tmp_path / "latin.txt").read_bytes() == b"caf\xe9\nx\xe9\n"
    # New text a Latin-1 file cannot hold is refused, naming the encoding.
    with pytest.raises(PatchError, match="Latin-1") as info:
        apply_patch_text(
            "*** Begin Patch\n*** Update File: latin.txt\n@@\n-x\u00e9\n+\u2014\n", tmp_path
        )
    assert (tmp_path / "latin.txt").read_bytes() == b"caf\xe9\nx\xe9\n"
    with pytest.raises(PatchError) as info:
        apply_patch_text(
            "*** Begin Patch\n*** Update File: latin.txt\n@@\n-caf\udce9 x\n", tmp_path
        )
    assert "caf\ufffd" in str(info.value)


def test_many_problems_are_capped(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(100)))
    chunks = "".join(f"@@\n-missing {i}\n+x\n" for i in range(25))
    with pytest.raises(PatchError) as info:
        apply_patch_text(f"*** Begin Patch\n*** Update File: f.txt\n{chunks}", tmp_path)
    message = str(info.value)
    assert "f.txt, chunk 10 (patch line 30)" in message
    assert "chunk 11 " not in message
    assert "... and 15 more problems." in message
    assert message.endswith("send the whole patch again (none of it was applied).")


async def test_concurrent_patches_to_one_file_both_apply(tmp_path: Path) -> None:
    import asyncio

    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    registry = builtin_registry()
    ctx = ToolContext(workspace=tmp_path)

    def patch(i: int) -> str:
        return f"*** Begin Patch\n*** Update File: f.txt\n@@\n-line {i}\n+LINE {i}\n"

    await asyncio.gather(*(registry.invoke("apply_patch", patch(i * 10), ctx) for i in range(20)))
    text = (tmp_path / "f.txt").read_text()
    assert all(f"LINE {i * 10}\n" in text for i in range(20))
    assert text.count("\n") == 200
