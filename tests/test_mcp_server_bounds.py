"""What one client of `interpreter mcp-server` may hold: execute calls sent without
waiting for any each get an engine worker of their own; past the cap they are refused
with a clear result, and the server runs the next one once room is made."""

from __future__ import annotations

import asyncio
from pathlib import Path

from codemode.assembly.program import ProgramParts
from codemode.host import ToolHost
from codemode.js_runtime.models import Limits
from codemode.mcp.approval import policy_decider
from codemode.mcp.server import HostService
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry

CAP = 16  # docs/mcp.md


async def test_programs_past_the_cap_are_refused_and_room_is_made_again(tmp_path: Path) -> None:
    def programs(registry: ToolRegistry, context: ToolContext, limits: Limits) -> ToolHost:
        # As `interpreter mcp-server` builds its program host (commands/mcp.py).
        return ToolHost.from_parts(ProgramParts(registry, context, None), limits=limits)

    service = HostService(
        ToolRegistry([]),
        tmp_path,
        decide=policy_decider("never", "workspace-write"),
        programs=programs,
    )
    try:
        slow = "await new Promise(r => setTimeout(r, 3000)); return 1"
        running = [asyncio.ensure_future(service.execute(slow)) for _ in range(CAP)]
        await asyncio.sleep(0.2)
        refused = await asyncio.wait_for(service.execute("return 2"), 10)
        assert refused.is_error
        said = refused.content[0].text
        assert "at once" in said and str(CAP) in said, said
        assert all(not r.done() for r in running), "the refusal waited for the others"
        results = await asyncio.wait_for(asyncio.gather(*running), 120)
        assert [r.structured_content["value"] for r in results] == [1] * CAP
        after = await service.execute("return 3")
        assert after.structured_content["value"] == 3
    finally:
        service.close()
