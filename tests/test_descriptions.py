"""What the model reads: every tool description and prompt, in every harness and dialect,
keeps the lines of its examples and lists (a patch example squashed onto one line is
no example at all), checked on the rendered text and in the request actually sent."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from agent_support import WIRES, provider_flags, run_cli

from codemode.assembly.show import describe_harness
from codemode.harnesses.catalog import get_harness, harness_infos
from codemode.harnesses.spec import load_table, table_names
from codemode_testkit.scripted_server import ScriptedModelServer

# Lines that only mean something on their own line: fenced code, patch and diff lines,
# list items, indented code, command transcripts. (The test's own idea, written apart
# from the code that renders them.)
_EXAMPLE_LINE = re.compile(r"^(```|\*\*\* |@@|[-+] ?\S|\s{2,}\S|\$ )")


def _example_blocks(text: str) -> list[list[str]]:
    """Runs of two or more consecutive lines of ``text`` where every line after the first
    is an example line (the first is what introduces it). Template lines are skipped."""
    blocks: list[list[str]] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if "{{" in line:
            current = []
            continue
        if line.strip().startswith("```"):
            fenced = not fenced
        example = fenced or bool(_EXAMPLE_LINE.match(line)) or line.strip().startswith("```")
        if line.strip() and (example and current):
            current.append(line.rstrip())
        else:
            if len(current) >= 2:
                blocks.append(current)
            current = [line.rstrip()] if line.strip() else []
    if len(current) >= 2:
        blocks.append(current)
    return blocks


def _same_line(rendered: str, source: str) -> bool:
    """``rendered`` is ``source`` (whitespace at the ends aside), maybe behind a
    JSDoc `` * `` prefix."""
    r, s = rendered.strip(), source.strip()
    return r == s or (r.startswith("* ") and r[2:].strip() == s)


def _contains_block(rendered: str, block: list[str]) -> bool:
    lines = rendered.splitlines()
    for i in range(len(lines) - len(block) + 1):
        if all(_same_line(lines[i + k], b) for k, b in enumerate(block)):
            return True
    return False


def _sources() -> dict[str, str]:
    """Every text a description or prompt is made from."""
    texts: dict[str, str] = {}
    for package, folder in (("codemode.harnesses", "prompts"), ("codemode.mcp", "prompts")):
        for entry in (resources.files(package) / folder).iterdir():
            if entry.name.endswith(".md"):
                texts[f"{folder}/{entry.name}"] = entry.read_text("utf-8")
    patch_doc = resources.files("codemode.tools") / "apply_patch.md"
    texts["tools/apply_patch.md"] = patch_doc.read_text("utf-8")
    for name in table_names():
        table = load_table(name)
        texts[f"{name}.code_notes"] = table.code_notes
        for tool in table.tools:
            texts[f"{name}.{tool.name}"] = tool.description
    return texts


def _rendered(cwd: Path) -> dict[str, str]:
    """Everything a session in each harness and dialect sends as prompt or description."""
    out: dict[str, str] = {}
    for info in harness_infos():
        for dialect in info.dialects:
            shown = describe_harness(info.name, dialect, cwd)  # type: ignore[arg-type]
            where = f"{info.name}/{dialect}"
            out[f"{where} instructions"] = shown["instructions"]
            for tool in shown["tools"] + shown.get("commands", []):
                out[f"{where} tool {tool['name']}"] = tool["description"]
    # The MCP server's execute tool, with its declarations and with tool search.
    from codemode.mcp.approval import policy_decider
    from codemode.mcp.server import HostService
    from codemode.tools.builtin import builtin_registry

    service = HostService(builtin_registry(), cwd, decide=policy_decider("never", "read-only"))
    out["mcp-server execute"] = service.execute_description()
    return out


def test_every_example_in_a_source_text_keeps_its_lines_where_it_is_used(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path)
    everything = "\n".join(rendered.values())
    sources = _sources()
    checked = 0
    for name, text in sources.items():
        for block in _example_blocks(text):
            checked += 1
            assert _contains_block(everything, block), (
                f"the example in {name} starting {block[0]!r} lost its lines"
            )
    assert checked >= 10  # the check found the examples it is about
    # The patch example in particular, wherever apply_patch is described to a model.
    patch = ["*** Begin Patch", "*** Update File: src/app.py", "@@ def main():"]
    with_patch = [k for k, v in rendered.items() if "*** Begin Patch" in v]
    assert any(k.startswith("native/code") for k in with_patch)
    for key in with_patch:
        if "Example" in rendered[key] and "src/app.py" in rendered[key]:
            assert _contains_block(rendered[key], patch), key


def test_no_description_is_squashed_prose_of_several_sentences_with_markers(
    tmp_path: Path,
) -> None:
    """A description line holding a patch marker after other text is a squashed block."""
    for key, text in _rendered(tmp_path).items():
        for line in text.splitlines():
            body = line.strip().removeprefix("* ")
            assert not re.search(r"\S.*\s\*\*\* (Update|Add|Delete) File:", body), (key, line)


@pytest.mark.parametrize("wire", WIRES)
def test_the_request_sent_in_code_mode_keeps_the_patch_example(
    wire: str, home: Path, work: Path
) -> None:
    with ScriptedModelServer([{"text": "ok"}]) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, wire), "--code-mode", "hi"],
            home=home, cwd=work,
        )
        assert run.code == 0, run.stderr
        body = json.dumps(server.requests[0].body)
    sent = json.loads(body)
    tools = sent.get("tools") or []
    descriptions = [
        t.get("description") or t.get("function", {}).get("description", "") for t in tools
    ]
    [exec_description] = [d for d in descriptions if "apply_patch" in d]
    assert _contains_block(
        exec_description,
        ["*** Begin Patch", "*** Update File: src/app.py", "@@ def main():", "args = parse()",
         "-    run(args)", "+    run(args, verbose=True)"],
    ), exec_description[:3000]


def test_the_classic_dialect_description_is_the_tools_own_text() -> None:
    harness = get_harness("native", "classic")
    from codemode.assembly.toolset import session_registry

    registry = harness.registry(session_registry())
    [spec] = [s for s in harness.tool_specs(registry) if s.name == "apply_patch"]
    assert "*** Begin Patch\n*** Update File: src/app.py\n" in spec.description
