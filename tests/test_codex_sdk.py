"""The official Codex SDK (npm @openai/codex-sdk, installed by scripts/setup.sh) drives
our executable through codexPathOverride: a two-turn thread (start with an output
schema, then resume by id with an image) and a failing turn, against the scripted
model server on the openai provider's wire (the SDK's baseUrl and apiKey)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_support import INTERPRETER, cli_env
from test_codex_exec import tiny_png

from codemode.testing.scripted_server import ScriptedModelServer

ROOT = Path(__file__).resolve().parent.parent
SDK_DIR = ROOT / ".cache" / "codex-sdk"
SDK_ENTRY = SDK_DIR / "node_modules" / "@openai" / "codex-sdk" / "dist" / "index.js"

DRIVER = """
import { Codex } from %(entry)s;
const [exe, baseUrl, work, extra, schemaPath, image, codemodeHome] = process.argv.slice(2);
const { readFileSync } = await import("node:fs");
const codex = new Codex({
  codexPathOverride: exe,
  baseUrl,
  apiKey: "sk-from-the-sdk",
  env: { PATH: process.env.PATH, HOME: process.env.HOME, CODEMODE_HOME: codemodeHome },
});
const options = {
  workingDirectory: work, skipGitRepoCheck: true, sandboxMode: "workspace-write",
  additionalDirectories: [extra], model: "scripted-model",
};
const thread = codex.startThread(options);
const first = await thread.run("count the files",
  { outputSchema: JSON.parse(readFileSync(schemaPath, "utf8")) });
const id = thread.id;
const again = codex.resumeThread(id, options);
const second = await again.run([
  { type: "text", text: "what is in the picture?" },
  { type: "local_image", path: image },
]);
let failure = null;
try { await codex.resumeThread(id, options).run("this one fails"); }
catch (e) { failure = e.message; }
console.log(JSON.stringify({ id, first, second, failure }));
"""


def sdk_or_skip() -> Path:
    if not SDK_ENTRY.is_file():
        log = SDK_DIR / "install.log"
        detail = log.read_text(errors="replace")[-500:] if log.is_file() else "no install log"
        pytest.skip(f"@openai/codex-sdk is not installed by scripts/setup.sh: {detail}")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    return SDK_ENTRY


def test_codex_sdk_thread_start_and_resume(tmp_path: Path) -> None:
    entry = sdk_or_skip()
    work, extra, home = tmp_path / "work", tmp_path / "extra", tmp_path / "cmhome"
    for d in (work, extra, home):
        d.mkdir()
    (work / "a.py").write_text("print(1)\n")
    (work / "b.py").write_text("print(2)\n")
    image = tmp_path / "pixel.png"
    image.write_bytes(tiny_png())
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
        "additionalProperties": False,
    }))
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER % {"entry": json.dumps(entry.as_uri())})
    script = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "ls *.py | wc -l"}}]},
        {"text": '{"count": 2}'},
        {"text": "A single green pixel."},
        {"status": 400, "error_message": "scripted refusal"},
    ]
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            ["node", str(driver), str(INTERPRETER), server.base_url, str(work), str(extra),
             str(schema), str(image), str(home)],
            capture_output=True,
            text=True,
            timeout=120,
            env=cli_env(home),
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # The thread id is ours (thread.started), and resuming it continued the same session.
    assert out["id"] and list((home / "sessions").glob(f"*{out['id']}*.jsonl"))
    assert json.loads(out["first"]["finalResponse"]) == {"count": 2}
    commands = [i for i in out["first"]["items"] if i["type"] == "command_execution"]
    assert commands[0]["aggregated_output"].strip() == "2"
    assert out["first"]["usage"]["input_tokens"] > 0
    assert out["second"]["finalResponse"] == "A single green pixel."
    assert "scripted refusal" in out["failure"]
    # What the SDK sent reached the model: the schema, the image, its key and base URL.
    first_body = json.dumps(server.requests[0].body)
    assert "Final answer format" in first_body and '\\"count\\"' in first_body
    assert server.requests[0].body["text"]["format"]["schema"]["required"] == ["count"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-the-sdk"
    assert server.requests[0].body["model"] == "scripted-model"
    resumed = json.dumps(server.requests[2].body)
    assert "count the files" in resumed and '"input_image"' in resumed
