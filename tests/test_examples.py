"""The bundled examples, run for real on a copy of examples/sample-repo."""

from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "sample-repo"
INTERPRETER = Path(sys.executable).parent / "interpreter"
ENGINES = ["quickjs", "v8"]

GENERATED = "calc_total = 1  # generated, ignored by git\n"
TRACKED_PY = [
    "scripts/report.py",
    "src/shop/__init__.py",
    "src/shop/cart.py",
    "src/shop/legacy_utils.py",
    "src/shop/receipt.py",
    "src/shop/text.py",
    "tests/test_cart.py",
]
TRACKED_JS = ["web/cart.js", "web/format.js"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A private copy of the sample repository, with its gitignored build output."""
    copy = tmp_path / "repo"
    shutil.copytree(SAMPLE, copy)
    generated = copy / "build" / "generated.py"
    if not generated.exists():  # build/ is gitignored, so a fresh checkout lacks it
        generated.parent.mkdir(parents=True, exist_ok=True)
        generated.write_text(GENERATED)
    return copy


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_example(
    name: str, repo: Path, *args: str, engine: str = "quickjs"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(INTERPRETER),
            "run",
            "--engine",
            engine,
            "--cwd",
            str(repo),
            str(EXAMPLES / name),
            *args,
        ],
        cwd=repo.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- rename_identifier.js --------------------------------------------------------------

RENAMED = ["scripts/report.py", "src/shop/cart.py", "src/shop/receipt.py", "tests/test_cart.py"]
RENAMED += ["web/cart.js"]
WHOLE_WORD = re.compile(r"(?<![\w$])calc_total(?![\w$])")


def test_sample_repo_is_as_expected() -> None:
    # The assertions below rely on these; fail loudly if the fixture changes.
    assert "calc_total_cached" in (SAMPLE / "src/shop/receipt.py").read_text()
    assert (SAMPLE / "scripts/report.py").read_text().startswith("#!/usr/bin/env python3\n")
    assert os.stat(SAMPLE / "scripts/report.py").st_mode & stat.S_IXUSR
    assert "build/" in (SAMPLE / ".gitignore").read_text().split()


def test_rename_identifier(repo: Path, engine: str) -> None:
    before = snapshot(repo)
    proc = run_example("rename_identifier.js", repo, "calc_total", "compute_total", engine=engine)
    assert proc.returncode == 0, proc.stderr
    after = snapshot(repo)

    for path in RENAMED:
        old, new = before[path].decode(), after[path].decode()
        assert WHOLE_WORD.search(old), path
        assert new == WHOLE_WORD.sub("compute_total", old), path
        assert not WHOLE_WORD.search(new), path
    # Nothing else changed: untouched files, and the gitignored build output.
    for path in set(before) - set(RENAMED):
        assert after[path] == before[path], path
    assert set(after) == set(before)
    assert (repo / "build/generated.py").read_text() == GENERATED

    cart = (repo / "src/shop/cart.py").read_text()
    assert "def compute_total(self):" in cart
    assert "money(self.compute_total())" in cart
    receipt = (repo / "src/shop/receipt.py").read_text()
    assert receipt.count("calc_total_cached") == 2
    assert "cart.compute_total()" in receipt
    test_cart = (repo / "tests/test_cart.py").read_text()
    assert "def test_calc_total():" in test_cart  # a different identifier
    assert "cart.compute_total() == 900" in test_cart
    assert "export function compute_total(items)" in (repo / "web/cart.js").read_text()

    lines = proc.stdout.splitlines()
    listed = sorted(line.split(":")[0] for line in lines if line.endswith(" replaced"))
    assert listed == sorted(RENAMED)
    assert "web/cart.js: 2 replaced" in lines
    assert "renamed calc_total -> compute_total: 9 occurrences in 5 files" in lines
    assert "build/generated.py" not in proc.stdout

    again = run_example("rename_identifier.js", repo, "calc_total", "compute_total", engine=engine)
    assert again.returncode == 0, again.stderr
    assert "0 occurrences in 0 files" in again.stdout
    assert "replaced" not in again.stdout
    assert snapshot(repo) == after


@pytest.mark.parametrize("names", [["calc-total", "x"], ["calc_total", "2fast"], ["a b", "c"]])
def test_rename_identifier_rejects_non_identifiers(repo: Path, names: list[str]) -> None:
    before = snapshot(repo)
    proc = run_example("rename_identifier.js", repo, *names)
    assert proc.returncode == 1
    assert "\nError: both names must be identifiers" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


def test_rename_identifier_glob_limits_files(repo: Path) -> None:
    proc = run_example("rename_identifier.js", repo, "calc_total", "compute_total", "**/*.js")
    assert proc.returncode == 0, proc.stderr
    assert "compute_total" in (repo / "web/cart.js").read_text()
    assert "def calc_total(self)" in (repo / "src/shop/cart.py").read_text()


# --- add_license_header.js -------------------------------------------------------------


def test_add_license_header_py(repo: Path, engine: str) -> None:
    before = snapshot(repo)
    proc = run_example(
        "add_license_header.js", repo, "py", "SPDX-License-Identifier: MIT", engine=engine
    )
    assert proc.returncode == 0, proc.stderr
    header = "# SPDX-License-Identifier: MIT"

    for path in TRACKED_PY:
        text = (repo / path).read_text()
        original = before[path].decode()
        if path == "scripts/report.py":
            assert text.splitlines()[:2] == ["#!/usr/bin/env python3", header]
            first, rest = original.split("\n", 1)
            assert text == f"{first}\n{header}\n{rest}"
        else:
            assert text.splitlines()[0] == header, path
            assert text == f"{header}\n{original}", path
    assert (repo / "build/generated.py").read_text() == GENERATED
    for path in TRACKED_JS:
        assert (repo / path).read_bytes() == before[path]

    mode = os.stat(repo / "scripts/report.py").st_mode
    assert mode & stat.S_IXUSR, oct(mode)
    assert stat.S_IMODE(mode) == stat.S_IMODE(os.stat(SAMPLE / "scripts/report.py").st_mode)
    assert "7 of 7 .py files changed" in proc.stdout
    assert "scripts/report.py: header added" in proc.stdout

    after = snapshot(repo)
    again = run_example(
        "add_license_header.js", repo, "py", "SPDX-License-Identifier: MIT", engine=engine
    )
    assert again.returncode == 0, again.stderr
    assert "0 of 7 .py files changed" in again.stdout
    assert snapshot(repo) == after


def test_add_license_header_js(repo: Path) -> None:
    before = snapshot(repo)
    proc = run_example("add_license_header.js", repo, "js", "SPDX-License-Identifier: MIT")
    assert proc.returncode == 0, proc.stderr
    for path in TRACKED_JS:
        text = (repo / path).read_text()
        assert text == "// SPDX-License-Identifier: MIT\n" + before[path].decode(), path
    for path in TRACKED_PY:
        assert (repo / path).read_bytes() == before[path]
    assert "2 of 2 .js files changed" in proc.stdout


def test_add_license_header_unknown_extension(repo: Path) -> None:
    before = snapshot(repo)
    proc = run_example("add_license_header.js", repo, "xyz", "SPDX-License-Identifier: MIT")
    assert proc.returncode == 1
    assert "\nError: no comment style known for .xyz" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


# --- migrate_import.js -----------------------------------------------------------------


def test_migrate_import(repo: Path, engine: str) -> None:
    before = snapshot(repo)
    proc = run_example("migrate_import.js", repo, "shop.legacy_utils", "shop.text", engine=engine)
    assert proc.returncode == 0, proc.stderr

    cart = (repo / "src/shop/cart.py").read_text()
    assert cart.splitlines()[0] == "from shop.text import money, slugify"
    receipt = (repo / "src/shop/receipt.py").read_text()
    assert receipt.splitlines()[0] == "import shop.text as legacy_utils"
    report = (repo / "scripts/report.py").read_text()
    assert "from shop.text import money" in report.splitlines()
    assert report.splitlines()[0] == "#!/usr/bin/env python3"
    for path in ("src/shop/cart.py", "src/shop/receipt.py", "scripts/report.py"):
        assert "shop.legacy_utils" not in (repo / path).read_text(), path
    assert (repo / "src/shop/legacy_utils.py").read_bytes() == before["src/shop/legacy_utils.py"]
    migrated = snapshot(repo)
    changed = {p for p in before if migrated[p] != before[p]}
    assert changed == {"src/shop/cart.py", "src/shop/receipt.py", "scripts/report.py"}
    assert "shop.legacy_utils -> shop.text: 3 files changed" in proc.stdout

    # The migrated code still works.
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'src'); from shop.receipt import receipt; "
            "from shop.cart import Cart; c = Cart(); c.add('Tea', 300, 3); print(receipt(c))",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert "total: $9.00" in run.stdout
    assert "tea: $9.00" in run.stdout
    # And the old module is no longer loaded by it.
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'src'); import shop.receipt, shop.cart; "
            "print('shop.legacy_utils' in sys.modules)",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.stdout.strip() == "False", check.stderr

    report_run = subprocess.run(
        [sys.executable, "scripts/report.py"],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo / "src")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert report_run.returncode == 0, report_run.stderr
    assert report_run.stdout.strip() == "calc_total: $25.00"

    after = snapshot(repo)
    again = run_example("migrate_import.js", repo, "shop.legacy_utils", "shop.text", engine=engine)
    assert again.returncode == 0, again.stderr
    assert "0 files changed" in again.stdout
    assert snapshot(repo) == after


# --- embed.py --------------------------------------------------------------------------


def test_embed_example(repo: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "embed.py"), str(repo)],
        cwd=repo.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    fields = {}
    for line in lines:
        key, sep, rest = line.partition(": ")
        if sep and key in ("output", "value", "tool calls"):
            fields[key] = rest
    assert fields["output"] == "2 open tickets, 7 Python files"
    # Open tickets 1 and 3; "Cart total is off by one cent" has 7 words, the other 4.
    assert ast.literal_eval(fields["value"]) == [{"id": 1, "words": 7}, {"id": 3, "words": 4}]
    calls = ast.literal_eval(fields["tool calls"])
    assert sorted(calls) == sorted(
        [("list_tickets", True), ("glob", True), ("word_count", True), ("word_count", True)]
    )
    assert calls[-2:] == [("word_count", True), ("word_count", True)]
    assert lines.count("event: tool_call.started") == 4
    assert lines.count("event: tool_call.finished") == 4
    assert lines.count("event: log") == 1
    assert "error:" not in proc.stdout


# --- hello.js --------------------------------------------------------------------------


def test_hello_under_interpreter(tmp_path: Path, engine: str) -> None:
    proc = subprocess.run(
        [str(INTERPRETER), "run", "--engine", engine, str(EXAMPLES / "hello.js")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from code mode!\n"
    assert proc.stderr == ""


def test_hello_under_node(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed, so hello.js cannot be checked under node")
    ours = subprocess.run(
        [str(INTERPRETER), "run", str(EXAMPLES / "hello.js")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    theirs = subprocess.run(
        [node, str(EXAMPLES / "hello.js")], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == "Hello from code mode!\n"
    assert ours.stdout == theirs.stdout


def test_rename_identifier_with_dollar_signs(repo: Path) -> None:
    (repo / "web" / "dom.js").write_text("const $el = find();\n$el.show(); x$el = 1;\n")
    proc = run_example("rename_identifier.js", repo, "$el", "$$node")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "web" / "dom.js").read_text() == (
        "const $$node = find();\n$$node.show(); x$el = 1;\n"
    )


def test_migrate_import_moves_attribute_uses(repo: Path) -> None:
    use = repo / "src" / "use.py"
    use.write_text("import shop.legacy_utils\n\nprint(shop.legacy_utils.money(5))\n")
    proc = run_example("migrate_import.js", repo, "shop.legacy_utils", "shop.text")
    assert proc.returncode == 0, proc.stderr
    assert use.read_text() == "import shop.text\n\nprint(shop.text.money(5))\n"
    out = subprocess.run(
        [sys.executable, "use.py"], cwd=repo / "src", capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout == "$0.05\n", out.stderr


def test_the_recorded_demo_session_fixes_the_bugfix_repo(tmp_path: Path) -> None:
    """The quick start's replayed session: the recorded model side, real tools."""
    repo = tmp_path / "bugfix"
    shutil.copytree(EXAMPLES / "bugfix-repo", repo)
    before = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=repo, capture_output=True, text=True
    )
    assert before.returncode != 0
    interpreter = Path(sys.executable).parent / "interpreter"
    replay = subprocess.run(
        [
            str(interpreter),
            "exec",
            "--replay",
            str(EXAMPLES / "sessions/fix-failing-test.jsonl"),
            "-C",
            str(repo),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "CODEMODE_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert replay.returncode == 0, replay.stderr
    assert "All 5 tests pass" in replay.stdout
    after = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=repo, capture_output=True, text=True
    )
    assert after.returncode == 0, after.stderr


def test_a_replay_whose_tools_fail_where_the_recording_succeeded_says_so(tmp_path: Path) -> None:
    """Run from the repository root (no -C): every tool call fails there. The recorded
    final answer claims success; the replay must not pass that off as a success."""
    interpreter = Path(sys.executable).parent / "interpreter"
    before = subprocess.run(["git", "status", "--porcelain"], cwd=EXAMPLES.parent,
                            capture_output=True, text=True)
    replay = subprocess.run(
        [str(interpreter), "exec", "--replay", "examples/sessions/fix-failing-test.jsonl"],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "CODEMODE_HOME": str(tmp_path / "home")},
        timeout=60,
    )
    assert replay.returncode == 1, replay.stderr
    last = replay.stderr.strip().splitlines()[-1]
    assert "did not do what they did in the recording" in last
    assert "read_file (call 2): failed now, completed in the recording" in last
    assert "-C DIR" in last and "Traceback" not in replay.stderr
    after = subprocess.run(["git", "status", "--porcelain"], cwd=EXAMPLES.parent,
                           capture_output=True, text=True)
    assert after.stdout == before.stdout  # nothing in the checkout was touched


def test_demo_prints_the_replay_command_it_runs() -> None:
    """The command demo.sh shows must be the one that works (with -C)."""
    demo = (EXAMPLES.parent / "scripts/demo.sh").read_text()
    shown = [line for line in demo.splitlines() if "interpreter exec" in line and "echo" in line]
    assert shown and all("-C" in line for line in shown), shown


def test_the_demo_sets_up_the_runtime_only_and_the_readme_stays_in_the_repository() -> None:
    root = EXAMPLES.parent
    demo = (root / "scripts/demo.sh").read_text()
    assert "scripts/setup-runtime.sh" in demo and "scripts/setup.sh" not in demo
    runtime = (root / "scripts/setup-runtime.sh").read_text()
    assert "[test]" not in runtime and "npm" not in runtime and "setup-test-servers" not in runtime
    assert "scripts/setup-runtime.sh" in (root / "scripts/setup.sh").read_text()
    readme = (root / "README.md").read_text()
    assert "../shared" not in readme and "/work/" not in readme
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (root / target).exists(), target
    assert (root / "docs/DESIGN.md").exists()
    design = (root / "docs/DESIGN.md").read_text()
    assert "../shared" not in design and "/work/" not in design
