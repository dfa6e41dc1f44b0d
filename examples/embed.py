"""Embedding the tool host: your own Python tools, called from JavaScript.

    python examples/embed.py [WORKSPACE]

Registers two tools next to the built-in ones, runs a program that uses both kinds
concurrently, and prints what came back.
"""

from __future__ import annotations

import asyncio
import sys

from pydantic import BaseModel, Field

from codemode import ToolHost


class Ticket(BaseModel):
    id: int
    title: str
    status: str = Field(description="open or closed")


TICKETS = [
    Ticket(id=1, title="Cart total is off by one cent", status="open"),
    Ticket(id=2, title="Receipt misses the currency", status="closed"),
    Ticket(id=3, title="Slugs keep trailing dashes", status="open"),
]


async def main(workspace: str) -> int:
    host = ToolHost(workspace)

    @host.tool
    async def list_tickets(status: str = "open") -> list[Ticket]:
        """Tickets from the (pretend) tracker, filtered by status."""
        return [t for t in TICKETS if t.status == status]

    @host.tool
    async def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    program = """
    const [tickets, files] = await Promise.all([
      tools.list_tickets({status: "open"}),
      tools.glob({pattern: "**/*.py"}),
    ]);
    const counts = await Promise.all(tickets.map(t => tools.word_count({text: t.title})));
    console.log(`${tickets.length} open tickets, ${files.matches.length} Python files`);
    return tickets.map((t, i) => ({id: t.id, words: counts[i]}));
    """
    result = await host.execute(program, on_event=lambda e: print("event:", e.type))
    host.close()
    print("output:", result.output)
    print("value:", result.value)
    print("tool calls:", [(c.name, c.ok) for c in result.tool_calls])
    if result.error is not None:
        print("error:", result.error.one_line())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else ".")))
