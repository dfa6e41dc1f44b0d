"""`interpreter tools --dts` against real MCP servers, checked by the TypeScript compiler.

The npm servers (@modelcontextprotocol/server-filesystem, -memory, -everything) and
tsc come from scripts/setup-test-servers.sh; two Python servers (tests/mcp_servers/
items_server.py) each define ``$defs/Item`` their own way. The declarations and a
program written against them must pass ``tsc --strict``; programs that break the
declared types must not; and the compiled program must run against the servers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import run_cli

from codemode.tools.base import Tool
from codemode.tools.registry import ToolRegistry
from codemode.tools.typescript import typescript_declarations

ROOT = Path(__file__).resolve().parent.parent
TSC = ROOT / ".cache" / "typescript" / "node_modules" / ".bin" / "tsc"
NPM_BIN = ROOT / ".cache" / "mcp-servers" / "node_modules" / ".bin"
ITEMS = Path(__file__).parent / "mcp_servers" / "items_server.py"
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

PROGRAM = """\
export {};
const media = await tools.fs.read_media_file({ path: "pic.png" });
const kinds: string[] = [];
for (const block of media.content) {
  if (block.type === "resource") {
    const uri: string = block.resource.uri;
    kinds.push("resource " + uri);
  } else {
    const data: string = block.data;
    kinds.push(block.type + " " + block.mimeType + " " + (data.length > 0));
  }
}
const dirs = await tools.fs.list_allowed_directories();
await tools.memory.create_entities({
  entities: [{ name: "Ada", entityType: "person", observations: ["wrote notes"] }],
});
const graph = await tools.memory.read_graph();
const people: string[] = graph.entities.map((e) => e.name + ":" + e.entityType);
const weather = await tools.everything.get_structured_content({ location: "Chicago" });
const warm: boolean = weather.temperature > -100;
const env = await tools.everything.get_env();
const texts = env.content.filter((c) => c.type === "text").length;
const book = await tools.books.store({ item: { title: "Dune", author: "Herbert" } });
const stock = await tools.stock.store({ item: { sku: "A1", count: 2 } });
const title: string = book.items[0].title;
const total: number = stock.items[0].count + book.total;
const empty = await tools.stock.count();
print(JSON.stringify({
  kinds, dirs: dirs !== null, people, warm, texts: texts > 0, title,
  sku: stock.items[0].sku, total, empty: empty.total,
}));
"""

# Each must fail to type-check: the declarations say what each server accepts.
WRONG = {
    "stock item written as a book": 'await tools.stock.store({ item: { title: "x" } });',
    "book item written as stock": 'await tools.books.store({ item: { sku: "A1", count: 1 } });',
    "required arguments left out": "await tools.everything.get_sum();",
    "the resource shape has no data": (
        'const m = await tools.fs.read_media_file({ path: "p" });\n'
        'for (const b of m.content) { if (b.type === "resource") { const d: string = b.data; } }'
    ),
}


def _need_tools() -> None:
    missing = [str(p) for p in (TSC, NPM_BIN / "mcp-server-everything") if not p.exists()]
    if missing:
        logs = [ROOT / ".cache" / d / "install.log" for d in ("typescript", "mcp-servers")]
        detail = " | ".join(p.read_text(errors="replace")[-300:] for p in logs if p.is_file())
        pytest.skip(
            f"not installed by scripts/setup-test-servers.sh: {', '.join(missing)} "
            f"({detail or 'no install log'})"
        )


def _config(home: Path, work: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    servers = {
        "fs": {"command": str(NPM_BIN / "mcp-server-filesystem"), "args": [str(work)]},
        "memory": {
            "command": str(NPM_BIN / "mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": str(home / "memory.jsonl")},
        },
        "everything": {"command": str(NPM_BIN / "mcp-server-everything")},
        "books": {"command": sys.executable, "args": [str(ITEMS), "books"]},
        "stock": {"command": sys.executable, "args": [str(ITEMS), "stock"]},
    }
    lines = []
    for name, table in servers.items():
        lines.append(f"[mcp_servers.{name}]")
        lines.append('trust = "write"')  # their tools run unasked (the program is ours)
        for key, value in table.items():
            if isinstance(value, dict):
                inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
    (home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tsc(folder: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TSC), "--strict", "--target", "es2022", "--module", "es2022", "--lib", "es2022",
         "--outDir", "out", *files],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _need_tools()
    base = tmp_path_factory.mktemp("dts")
    home, work = base / "home", base / "work"
    work.mkdir()
    (work / "pic.png").write_bytes(TINY_PNG)
    _config(home, work)
    done = run_cli(["tools", "--dts"], home=home, cwd=work, timeout=120)
    assert done.code == 0, done.stderr
    (base / "tools.d.ts").write_text(done.stdout, encoding="utf-8")
    return {"base": base, "home": home, "work": work, "dts": done.stdout}


def test_declarations_name_each_shape_once(declared: dict[str, Any]) -> None:
    dts = declared["dts"]
    names = re.findall(r"^interface (\w+) \{", dts, re.MULTILINE)
    assert len(names) == len(set(names))
    # read_media_file's two content shapes, each with its own interface
    item = "McpFsReadMediaFileResultContentItem"
    assert f"content: ({item} | {item}2)[]" in dts
    # two servers' $defs/Item: two interfaces, each with its own fields
    items = {n: re.search(rf"^interface {n} \{{(.*?)^\}}", dts, re.S | re.M) for n in names}
    item_bodies = {n: m.group(1) for n, m in items.items() if m and re.fullmatch(r"Item\d*", n)}
    assert len(item_bodies) == 2
    assert sorted("title: string" in b for b in item_bodies.values()) == [False, True]
    assert sorted("sku: string" in b for b in item_bodies.values()) == [False, True]
    # callable with no arguments when none is required; never an empty comment
    assert "get_env(args?: McpEverythingGetEnvArgs)" in dts
    assert "get_sum(args: McpEverythingGetSumArgs)" in dts
    assert "/**  */" not in dts and "/** */" not in dts
    assert re.search(r"^    count\(args\?: McpStockCountArgs\)", dts, re.M)


def test_tsc_strict_accepts_the_declarations_and_a_program(declared: dict[str, Any]) -> None:
    base: Path = declared["base"]
    (base / "program.ts").write_text(PROGRAM, encoding="utf-8")
    done = _tsc(base, "tools.d.ts", "program.ts")
    assert done.returncode == 0, done.stdout + done.stderr
    # The compiled program runs against the same servers and sees what its types said.
    js = (base / "out" / "program.js").read_text(encoding="utf-8").replace("export {};", "")
    (base / "program.js").write_text(js, encoding="utf-8")
    # The servers have no trust setting (their calls would ask); nobody is here to ask.
    ran = run_cli(["run", "--approval", "never", str(base / "program.js")], home=declared["home"],
                  cwd=declared["work"], timeout=120)
    assert ran.code == 0, ran.stdout + ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["kinds"] == ["image image/png true"]
    assert seen["people"] == ["Ada:person"] and seen["title"] == "Dune"
    assert (seen["sku"], seen["total"], seen["empty"]) == ("A1", 3, 0)
    assert seen["warm"] is True and seen["texts"] is True


@pytest.mark.parametrize("case", sorted(WRONG))
def test_tsc_strict_refuses_programs_that_break_the_types(
    declared: dict[str, Any], case: str
) -> None:
    base: Path = declared["base"]
    name = re.sub(r"\W+", "_", case) + ".ts"
    (base / name).write_text("export {};\n" + WRONG[case] + "\n", encoding="utf-8")
    done = _tsc(base, "tools.d.ts", name)
    assert done.returncode != 0
    assert re.search(r"error TS\d+", done.stdout), done.stdout + done.stderr


def test_hostile_definition_names_do_not_shadow_the_standard_library() -> None:
    from codemode.mcp.adapter import normalize_schema, schema_model

    async def handler(args: Any, ctx: Any) -> Any:
        return None

    schema = normalize_schema({
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/Promise"}, "q": {"$ref": "#/$defs/my item"}},
        "$defs": {
            "Promise": {"type": "object", "properties": {"then": {"type": "string"}}},
            "my item": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
    })
    registry = ToolRegistry([Tool("mcp__s__t", "", schema_model("a", schema), None, handler)])
    dts = typescript_declarations(registry)
    assert "interface Promise " not in dts and "interface Promise2 {" in dts
    assert "interface MyItem {" in dts
    assert "    t(args?: McpSTArgs): Promise<unknown>;" in dts
    assert "/**  */" not in dts


def test_recursive_and_absurdly_deep_schemas_declare_without_overflowing() -> None:
    from codemode.mcp.adapter import normalize_schema, schema_model

    async def handler(args: Any, ctx: Any) -> Any:
        return None

    node = {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}, "v": {"type": "string"}}}
    recursive = normalize_schema({"type": "object", "properties": {"n": {"$ref": "#/$defs/Node"}},
                                  "$defs": {"Node": node}})
    deep: dict[str, Any] = {"type": "object", "properties": {}}
    cursor = deep
    for _ in range(5000):  # a hostile server's schema, far past Python's recursion limit
        cursor["properties"]["x"] = {"type": "object", "properties": {}}
        cursor = cursor["properties"]["x"]
    registry = ToolRegistry([
        Tool("mcp__s__tree", "Tree.", schema_model("t", recursive), None, handler),
        Tool("mcp__s__deep", "Deep.", schema_model("d", normalize_schema(deep)), None, handler),
    ])
    dts = typescript_declarations(registry)
    assert "interface Node {\n  kids?: Node[];\n  v?: string;\n}" in dts
    assert dts.count("interface McpSDeepArgs {") == 1
    assert len(dts) < 20_000  # cut to "unknown" some levels down, not written out
