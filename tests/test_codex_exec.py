"""`interpreter exec` accepts what the Codex SDK passes: --sandbox, --add-dir,
--skip-git-repo-check, --output-schema (checked, one retry), --image (on every wire),
`resume THREAD_ID`, Codex config keys and CODEX_API_KEY."""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest
from agent_support import WIRES, provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    w.mkdir()
    return w


@pytest.mark.parametrize("wire", WIRES)
def test_image_reaches_the_model_on_every_wire(wire: str, home: Path, work: Path) -> None:
    image = work / "shot.png"
    image.write_bytes(tiny_png())
    encoded = base64.b64encode(tiny_png()).decode()
    with ScriptedModelServer([{"text": "a green pixel"}]) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, wire), "--image", str(image), "what is it"],
            home=home,
            cwd=work,
        )
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "a green pixel"
    body = json.dumps(server.requests[0].body)
    assert encoded in body
    if wire == "chat":
        assert f"data:image/png;base64,{encoded}" in body and '"image_url"' in body
    elif wire == "responses":
        assert '"input_image"' in body
    else:
        assert '"media_type": "image/png"' in body


def test_image_that_is_not_an_image_is_refused(home: Path, work: Path) -> None:
    (work / "notes.txt").write_text("x")
    run = run_cli(
        ["exec", *provider_flags("http://127.0.0.1:9/v1", "chat"), "-i", "notes.txt", "hi"],
        home=home,
        cwd=work,
    )
    assert run.code == 2
    assert "--image notes.txt: not an image file" in run.stderr


@pytest.mark.parametrize("shape", ["fifo", "zero", "environ", "sparse"])
def test_an_image_a_command_could_have_shaped_is_refused_without_reading_it(
    shape: str, home: Path, work: Path
) -> None:
    """``--image shot.png`` names a file in the workspace, which a command may have made
    a FIFO (it never ends), a link to /dev/zero or /proc/self/environ, or a sparse
    terabyte: refused, not read until memory or time runs out."""
    image = work / "shot.png"
    if shape == "fifo":
        os.mkfifo(image)
    elif shape == "zero":
        image.symlink_to("/dev/zero")
    elif shape == "environ":
        image.symlink_to("/proc/self/environ")
    else:
        with open(image, "wb") as f:
            f.truncate(1 << 40)
    run = run_cli(
        ["exec", *provider_flags("http://127.0.0.1:9/v1", "chat"), "-i", "shot.png", "hi"],
        home=home,
        cwd=work,
        timeout=60,
    )
    assert run.code == 2, run.stderr
    assert "--image shot.png: " in run.stderr and "Traceback" not in run.stderr, run.stderr


SCHEMA = {
    "type": "object",
    "properties": {"files": {"type": "integer"}, "summary": {"type": "string"}},
    "required": ["files", "summary"],
    "additionalProperties": False,
}


def test_output_schema_retries_once_with_the_validation_error(home: Path, work: Path) -> None:
    schema = work / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    script = [
        {"text": "There are 2 files."},
        {"text": '{"files": "two", "summary": "x"}'},
    ]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            [
                "exec",
                *provider_flags(server.base_url, "responses"),
                "--json",
                "--output-schema",
                str(schema),
                "count",
            ],
            home=home,
            cwd=work,
        )
    assert run.code == 1
    events = run.events()
    assert events[-1]["type"] == "turn.failed"
    assert "files: 'two' is not of type 'integer'" in events[-1]["error"]["message"]
    first = json.dumps(server.requests[0].body)
    assert "Final answer format" in first and '\\"additionalProperties\\": false' in first
    retry = json.dumps(server.requests[1].body)
    assert "it is not valid JSON" in retry
    # A strict-compatible schema is also enforced by the responses wire itself.
    fmt = server.requests[0].body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"] == SCHEMA and fmt["strict"] is True

    good = [{"text": "```json\n{}\n```"}, {"text": '{"files": 2, "summary": "two files"}'}]
    with ScriptedModelServer(good) as server:
        run = run_cli(
            [
                "exec",
                *provider_flags(server.base_url, "chat"),
                "--output-schema",
                str(schema),
                "count",
            ],
            home=home,
            cwd=work,
        )
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout) == {"files": 2, "summary": "two files"}


def test_output_schema_file_must_be_a_schema(home: Path, work: Path) -> None:
    bad = work / "bad.json"
    bad.write_text('{"type": 12}')
    run = run_cli(
        [
            "exec",
            *provider_flags("http://127.0.0.1:9/v1", "chat"),
            "--output-schema",
            str(bad),
            "x",
        ],
        home=home,
        cwd=work,
    )
    assert run.code == 2
    assert "not a valid JSON Schema" in run.stderr


def test_add_dir_sandbox_skip_git_and_resume_form(home: Path, work: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": str(extra / "a.txt"), "content": "A"}},
                {
                    "name": "write_file",
                    "arguments": {"path": str(outside / "b.txt"), "content": "B"},
                },
            ]
        },
        {"text": "wrote one"},
        {"text": "second turn"},
    ]
    with ScriptedModelServer(script) as server:
        flags = provider_flags(server.base_url, "chat")
        first = run_cli(
            [
                "exec",
                "--experimental-json",
                *flags,
                "--sandbox",
                "workspace-write",
                "--add-dir",
                str(extra),
                "--skip-git-repo-check",
                "write",
            ],
            home=home,
            cwd=work,
        )
        assert first.code == 0, first.stderr
        thread = first.events()[0]
        assert thread["type"] == "thread.started"
        second = run_cli(
            ["exec", "--experimental-json", *flags, "resume", thread["thread_id"]],
            home=home,
            cwd=work,
            stdin="and again",
        )
    assert (extra / "a.txt").read_text() == "A"
    assert not (outside / "b.txt").exists()
    results = json.dumps(server.requests[1].body)
    assert f"refusing to write {outside / 'b.txt'}: outside the writable roots" in results
    assert second.code == 0, second.stderr
    events = second.events()
    assert events[0] == {"type": "thread.started", "thread_id": thread["thread_id"]}
    assert events[-2]["item"]["text"] == "second turn"
    # The resumed turn carries the whole conversation, ending with the stdin prompt.
    assert "wrote one" in json.dumps(server.requests[2].body)
    assert "and again" in json.dumps(server.requests[2].body)


def test_codex_config_keys_and_api_key(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "hello"}]) as server:
        run = run_cli(
            [
                "exec",
                "--experimental-json",
                "--config",
                f'openai_base_url="{server.base_url}"',
                "--config",
                'web_search="disabled"',
                "--config",
                "sandbox_workspace_write.network_access=false",
                "--config",
                'approval_policy="never"',
                "--model",
                "gpt-test",
                "hi",
            ],
            home=home,
            cwd=work,
            CODEX_API_KEY="sk-from-sdk",
        )
    assert run.code == 0, run.stderr
    assert "web_search: not supported by codemode; ignored" in run.stderr
    request = server.requests[0]
    assert request.wire == "responses"  # the openai provider's wire
    assert request.headers["authorization"] == "Bearer sk-from-sdk"
    assert request.body["model"] == "gpt-test"


def test_exec_resume_last_and_usage_errors(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "one"}, {"text": "two"}]) as server:
        flags = provider_flags(server.base_url, "chat")
        first = run_cli(["exec", "--json", *flags, "start"], home=home, cwd=work)
        again = run_cli(
            ["exec", "--json", *flags, "resume", "--last", "go on"], home=home, cwd=work
        )
    assert first.code == 0 and again.code == 0, again.stderr
    assert again.events()[0]["thread_id"] == first.events()[0]["thread_id"]
    assert "one" in json.dumps(server.requests[1].body)
    misplaced = run_cli(["exec", "--last", "hi"], home=home, cwd=work)
    assert misplaced.code == 2 and "--last goes with resume" in misplaced.stderr
    extra = run_cli(["exec", "one", "two"], home=home, cwd=work)
    assert extra.code == 2 and "too many arguments: 'two'" in extra.stderr


def test_strict_compatible_schemas() -> None:
    from codemode.agent.output_schema import strict_compatible

    assert strict_compatible(SCHEMA)
    assert not strict_compatible({"type": "object", "properties": {"a": {"type": "string"}}})
    nested = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}},
                    "required": ["x"],
                },
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    }
    assert not strict_compatible(nested)  # the inner object allows extra properties
    nested["properties"]["items"]["items"]["additionalProperties"] = False
    assert strict_compatible(nested)
    assert strict_compatible({"type": "string"})
