"""Client-side cost of the provider wires, per wire, printed as one JSON object.

    .venv/bin/python benchmarks/providers.py [--quick]

Against the scripted model server on 127.0.0.1 (so the figures are our parsing and
assembly plus a local HTTP round trip, not a model's speed):

- first_delta_ms: request sent to first text delta, for a short reply (median);
- request_ms: a whole short reply, request to ``Completed`` (median);
- events_per_s: stream events handled per second for a long reply (a 4,000-word text
  and a 20 kB tool call), median of runs.

Target: the wires add well under 1 ms per event (events_per_s >= 5,000), so a model's
own speed is always the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from codemode.providers.base import Completed, ModelRequest, TextDelta, ToolSpec, UserMessage
from codemode.providers.catalog import ProviderInfo, open_provider
from codemode_testkit.scripted_server import ScriptedModelServer, ScriptedReply, ScriptedToolCall

WIRES = ("chat", "responses", "anthropic")
LONG = ScriptedReply(
    text=" ".join(f"word{i}" for i in range(4000)),
    tool_calls=[ScriptedToolCall(name="write", arguments={"content": "x" * 20_000})],
)
SHORT = ScriptedReply(text="A short answer in a few words.")
TOOL = ToolSpec(name="write", description="Write.", parameters={"type": "object"})


async def measure(wire: str, runs: int) -> dict[str, float]:
    replies = [SHORT] * runs + [LONG] * runs
    with ScriptedModelServer(replies) as server:
        provider = open_provider(ProviderInfo(name=wire, base_url=server.base_url,
                                              wire_api=wire))
        request = ModelRequest(model="bench", messages=[UserMessage(text="hi")], tools=[TOOL])
        first, whole, rates = [], [], []
        for _ in range(runs):
            start = time.perf_counter()
            seen = None
            async for event in provider.stream(request):
                if seen is None and isinstance(event, TextDelta):
                    seen = time.perf_counter()
            whole.append(time.perf_counter() - start)
            first.append((seen or start) - start)
        for _ in range(runs):
            start = time.perf_counter()
            count = 0
            async for event in provider.stream(request):
                count += 1
                if isinstance(event, Completed):
                    assert len(event.message.tool_calls) == 1
            rates.append(count / (time.perf_counter() - start))
        await provider.aclose()
    return {
        "first_delta_ms": round(statistics.median(first) * 1000, 2),
        "request_ms": round(statistics.median(whole) * 1000, 2),
        "events_per_s": round(statistics.median(rates)),
    }


async def main(runs: int) -> dict[str, dict[str, float]]:
    return {wire: await measure(wire, runs) for wire in WIRES}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(3 if args.quick else 15)), indent=2))
