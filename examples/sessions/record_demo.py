"""Re-record ``fix-failing-test.jsonl``, the demo session the quick start replays.

The model side is scripted here (no model service is reachable where codemode is
built), served by the scripted model server on 127.0.0.1 over the Responses wire, and
driven through the real ``interpreter exec --code-mode`` on a copy of
``examples/bugfix-repo``; the tools really run. Run from the repository root:

    .venv/bin/python examples/sessions/record_demo.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from codemode_testkit.scripted_server import ScriptedModelServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent / "bugfix-repo"
OUT = HERE / "fix-failing-test.jsonl"

PROMPT = "The test suite of this repository fails. Find out why and fix it."

EXPLORE = """\
const [core, run] = await Promise.all([
  tools.read_file({ path: "textstats/core.py" }),
  tools.shell({ command: "python3 -m unittest -q 2>&1 | tail -15" }),
]);
console.log(run.output);
const lines = core.content.split("\\n");
const at = lines.findIndex((l) => l.startsWith("def average_word_length"));
console.log(lines.slice(at, at + 4).map((l, i) => `${at + i + 1}: ${l}`).join("\\n"));
"""

FIX = """\
const patch = await tools.apply_patch(`*** Begin Patch
*** Update File: textstats/core.py
@@ def average_word_length(text: str) -> float:
     found = words(text)
-    return sum(len(w) for w in found) / len(found)
+    if not found:
+        return 0.0
+    return sum(len(w) for w in found) / len(found)
*** End Patch`);
console.log(patch.changes);
const run = await tools.shell({ command: "python3 -m unittest -q" });
console.log(run.exit_code === 0 ? "all tests pass" : run.output);
"""

SCRIPT = [
    {
        "reasoning": "Run the tests and look at the code they exercise, in one program.",
        "tool_calls": [{"name": "exec", "arguments": EXPLORE, "freeform": True}],
    },
    {
        "text": "`average_word_length` divides by the number of words, which is zero for "
        "text without words; the test expects 0.0 there. Guarding that case.",
        "tool_calls": [{"name": "exec", "arguments": FIX, "freeform": True}],
    },
    {
        "text": "Fixed: `average_word_length` in `textstats/core.py` now returns 0.0 for "
        "text without words instead of dividing by zero. All 5 tests pass "
        "(`python3 -m unittest -q`)."
    },
]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work, home = Path(tmp) / "textstats", Path(tmp) / "home"
        shutil.copytree(REPO, work)
        env = {**os.environ, "CODEMODE_HOME": str(home)}
        with ScriptedModelServer(SCRIPT) as server:
            proc = subprocess.run(
                [
                    Path(sys.executable).parent / "interpreter",
                    "exec",
                    "--code-mode",
                    "-c",
                    "model_provider=demo",
                    "-c",
                    f"model_providers.demo.base_url={server.base_url}",
                    "-c",
                    "model_providers.demo.wire_api=responses",
                    "--model",
                    "scripted-demo-model",
                    PROMPT,
                ],
                cwd=work,
                env=env,
            )
        if proc.returncode != 0:
            print(f"recording failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        [session] = (home / "sessions").glob("*.jsonl")
        shutil.copyfile(session, OUT)
    print(f"wrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
