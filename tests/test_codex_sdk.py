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

from codemode_testkit.scripted_server import ScriptedModelServer

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


STREAM_DRIVER = """
import { Codex } from %(entry)s;
const [exe, baseUrl, work, codemodeHome, python, probe] = process.argv.slice(2);
const codex = new Codex({
  codexPathOverride: exe,
  baseUrl,
  apiKey: "sk-from-the-sdk",
  env: { PATH: process.env.PATH, HOME: process.env.HOME, CODEMODE_HOME: codemodeHome },
  config: { mcp_servers: { probe: { command: python, args: [probe], trust: "read" } } },
});
const options = { workingDirectory: work, skipGitRepoCheck: true,
                  sandboxMode: "workspace-write", model: "scripted-model" };
const thread = codex.startThread(options);
const turns = [];
for (const prompt of ["make the file and add", "this one fails"]) {
  const events = [];
  let thrown = null;
  try {
    const { events: stream } = await thread.runStreamed(prompt);
    for await (const event of stream) events.push(event);
  } catch (e) { thrown = e.message; }  // a failed turn also ends with exit status 1
  turns.push({ events, thrown });
}
console.log(JSON.stringify({ id: thread.id, turns }));
"""

PATCH = (
    "*** Begin Patch\n*** Add File: made.txt\n+made\n"
    "*** Update File: old.txt\n@@\n-old\n+new\n*** End Patch\n"
)


def test_codex_sdk_reads_events_with_its_own_field_names_and_types(tmp_path: Path) -> None:
    """What a Codex SDK program reads from runStreamed: the thread id is a UUID; usage has
    reasoning_output_tokens and cache_write_input_tokens as numbers; a file_change lists
    its changes, with absolute paths, when it starts; an MCP call's result is
    {content, structured_content} and a failed one's error is {message}; a failed turn
    is an error event, then turn.failed."""
    import sys
    import uuid

    entry = sdk_or_skip()
    work, home = tmp_path / "work", tmp_path / "cmhome"
    work.mkdir()
    home.mkdir()
    (work / "old.txt").write_text("old\n")
    probe = Path(__file__).resolve().parent / "mcp_servers" / "probe_server.py"
    driver = tmp_path / "driver.mjs"
    driver.write_text(STREAM_DRIVER % {"entry": json.dumps(entry.as_uri())})
    script = [
        {"tool_calls": [{"name": "apply_patch", "arguments": PATCH, "freeform": True},
                        {"name": "shell", "arguments": {"command": "echo hi"}}]},
        {"tool_calls": [{"name": "mcp__probe__add", "arguments": {"a": 2, "b": 3}},
                        {"name": "mcp__probe__shout", "arguments": {"text": "hi"}},
                        {"name": "mcp__probe__refuse", "arguments": {"reason": "no way"}}]},
        {"text": "done"},
        {"status": 400, "error_message": "scripted refusal"},
    ]
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            ["node", str(driver), str(INTERPRETER), server.base_url, str(work), str(home),
             sys.executable, str(probe)],
            capture_output=True, text=True, timeout=120, env=cli_env(home),
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert str(uuid.UUID(out["id"])) == out["id"]
    assert out["turns"][0]["thrown"] is None, out["turns"][0]
    first, failed = (turn["events"] for turn in out["turns"])
    assert [e["type"] for e in first[:2]] == ["thread.started", "turn.started"]
    assert first[-1]["type"] == "turn.completed"
    usage = first[-1]["usage"]
    for key in ("input_tokens", "cached_input_tokens", "cache_write_input_tokens",
                "output_tokens", "reasoning_output_tokens"):
        assert isinstance(usage[key], int), (key, usage)
    assert usage["input_tokens"] > 0

    started = [e["item"] for e in first if e["type"] == "item.started"]
    completed = [e["item"] for e in first if e["type"] == "item.completed"]
    patch_start = next(i for i in started if i["type"] == "file_change")
    expected = [{"path": str(work / "made.txt"), "kind": "add"},
                {"path": str(work / "old.txt"), "kind": "update"}]
    assert [{k: c[k] for k in ("path", "kind")} for c in patch_start["changes"]] == expected
    patch_done = next(i for i in completed if i["type"] == "file_change")
    assert patch_done["status"] == "completed"
    assert [{k: c[k] for k in ("path", "kind")} for c in patch_done["changes"]] == expected
    assert (work / "old.txt").read_text() == "new\n"
    command = next(i for i in completed if i["type"] == "command_execution")
    assert command["exit_code"] == 0 and command["aggregated_output"].strip() == "hi"

    calls = {i["tool"]: i for i in completed if i["type"] == "mcp_tool_call"}
    add, shout, refuse = calls["add"], calls["shout"], calls["refuse"]
    assert add["server"] == "probe" and add["status"] == "completed"
    assert add["result"]["structured_content"] == {"total": 5}
    assert json.loads(add["result"]["content"][0]["text"]) == {"total": 5}
    assert shout["result"]["structured_content"] is None
    assert shout["result"]["content"] == [{"type": "text", "text": "HI"}]
    assert refuse["status"] == "failed" and "result" not in refuse
    assert isinstance(refuse["error"]["message"], str) and "no way" in refuse["error"]["message"]

    # A running command has no exit code yet (undefined, not null).
    running = [i for i in started if i["type"] == "command_execution"]
    assert running and all("exit_code" not in i for i in running)

    kinds = [e["type"] for e in failed]
    assert kinds[-2:] == ["error", "turn.failed"], kinds
    assert "scripted refusal" in failed[-2]["message"]
    assert failed[-1]["error"]["message"] == failed[-2]["message"]
