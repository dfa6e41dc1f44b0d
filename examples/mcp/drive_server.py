"""Another agent embedding ours: start `interpreter mcp-server` and call `execute`.

    python examples/mcp/drive_server.py [WORKSPACE]

Uses the official `mcp` SDK's client over stdio, lists the tools, runs one program
that reads files concurrently, and prints its structured result.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

PROGRAM = """
const found = await tools.glob({pattern: "*.md"});
const files = await Promise.all(found.matches.slice(0, 3).map((path) => tools.read_file({path})));
for (const f of files) console.log(f.path, f.total_lines, "lines");
return files.length;
"""


async def main(workspace: Path) -> None:
    interpreter = shutil.which("interpreter") or str(Path(sys.executable).parent / "interpreter")
    server = StdioServerParameters(command=interpreter, args=["mcp-server"], cwd=workspace)
    async with Client(stdio_client(server)) as client:
        listed = await client.list_tools()
        print("tools:", ", ".join(t.name for t in listed.tools))
        result = await client.call_tool("execute", {"code": PROGRAM})
        print(result.content[0].text)
        print("structured:", result.structured_content)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
