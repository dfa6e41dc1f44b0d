"""Codex 0.169 with our code-mode host vs with its own, printed as JSON.

    .venv/bin/python benchmarks/codex_host.py [--runs N] [--calls N]

1. Whole process: one ``codex exec --enable code_mode_only --enable code_mode_host`` turn
   against the scripted model server (Responses wire): the model's first reply is a
   program making CALLS nested ``exec_command`` calls (``echo call-I``, plain shell),
   awaited one after another (``sequential``) or all in one ``Promise.all``
   (``parallel``); the second is a final message. The same Codex binary runs it with its
   own ``codex-code-mode-host`` and with ours beside it (``codemode.codex_host.warm.beside``),
   the sides in another order each round (``rotated``), fresh workspace and home each
   run. Ours twice: ``ours``, the plain shim (every session starts a Python host, cold:
   ``CODEMODE_WARM=0``), and ``ours_warm``, the warm shim (``beside(..., warm=True)``:
   the compiled client hands the session to this user's warm server, ``codemode.warm``,
   whose spare for a host has its engine worker booted; ``CODEMODE_WARM=1``, and a
   runtime folder of the benchmark's own; the
   untimed first turn starts that server, as a user's first session would).
   Turns start ``GAP_S`` apart. ``ratio`` / ``ratio_warm`` is ours / Codex's median
   wall time (target <= 1.0: ours no slower); ``paired_difference_ms``: ours minus
   Codex's within each round (the sides run back to back), its median and how many
   rounds ours was faster.
2. The host's own time per nested call: each host alone on TCP (``--listen
   grpc://127.0.0.1:PORT``), driven by one Python gRPC client that answers every tool
   call at once. A program makes CALLS calls to a no-op tool; the host reports how long
   it took (``code_mode_host_duration_ns``, which includes the client's answers, the same
   client for both); per call = (that - the same program with no call) / CALLS, medians.

   ``cpu_us_per_call``: the CPU the host (and its engine workers) used over those
   programs, from /proc, divided by the nested calls they made (the programs' own runs
   included): on a busy machine CPU time says more than wall time.
3. The host's start (``start``): spawned with ``--listen grpc+stdio://`` and sent an
   HTTP/2 preface, how long until its first byte comes back (its SETTINGS, sent once
   it can serve: Codex starts its host at the turn's first exec and waits for it), and
   the CPU the host process had used by then (10 ms clock ticks), medians, rotated;
   for ``ours_warm`` the process spawned is the client, so no CPU is given.

Needs the Codex 0.169 linux x64 build that scripts/setup-test-servers.sh caches (else
``{"skipped": REASON}``). ``load_average`` says how busy the machine was.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.codex_host.warm.beside import vendor_with_our_host, warm_words
from codemode.warm import place
from codemode.warm import start as start_warm
from codemode_testkit.scripted_server import ScriptedModelServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codex_compare import cache_dir, homes, script, tool_output

VERSION = os.environ.get("CODEX_CLI_VERSION", "0.169.0")
VENDOR = "node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl"
INTERPRETER = str(Path(sys.executable).parent / "interpreter")
SIDES = ("codex_host", "ours", "ours_warm")
# Between two turns, whichever sides: what one turn leaves running (the warm server
# makes its next spare half a second after a session ends) must not land in the next.
GAP_S = 2.0
# Each side's environment beside the benchmark's: ours cold, ours warm.
SIDE_ENV = {"codex_host": {}, "ours": {"CODEMODE_WARM": "0"}, "ours_warm": {"CODEMODE_WARM": "1"}}


def program(calls: int, parallel: bool, tool: str = "exec_command") -> str:
    call = (
        f"tools.{tool}({{cmd: `echo call-${{i}}`, login: false}})"
        if tool == "exec_command"
        else f"tools.{tool}({{i}})"
    )
    if parallel:
        body = f"const rs = await Promise.all(Array.from({{length: {calls}}}, (_, i) => {call}));\n"
    else:
        body = f"const rs = [];\nfor (let i = 0; i < {calls}; i++) rs.push(await {call});\n"
    # Codex's pragma: no yield however slow the machine (exec's default is 10 s).
    return '// @exec: {"yield_time_ms": 600000}\n' + body + "text(`${rs.length} calls`);\n"


def rotated(sides: tuple[str, ...], round_number: int) -> tuple[str, ...]:
    """The sides in round ``round_number``'s order: each takes each place in turn. With
    Codex's own host as two sides, the later turn of a round came out ~100 ms slower
    (11 rounds, 5.5 s turns): a fixed order charges that to the same side every round."""
    k = round_number % len(sides)
    return sides[k:] + sides[:k]


def run_turn(codex: Path, code: str, side: str) -> float:
    with homes() as (ws, home), ScriptedModelServer(script(code)) as server:
        (home / "config.toml").write_text(
            'model = "gpt-5.5"\nmodel_provider = "scripted"\n'
            'approval_policy = "never"\nsandbox_mode = "workspace-write"\n'
            "check_for_update_on_startup = false\nsuppress_unstable_features_warning = true\n\n"
            f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{server.base_url}"\n'
            'wire_api = "responses"\n',
            encoding="utf-8",
        )
        argv = [
            str(codex), "exec", "--enable", "code_mode_only", "--enable", "code_mode_host",
            "--skip-git-repo-check", "-C", str(ws), "run the program",
        ]  # fmt: skip
        t0 = time.perf_counter()
        done = subprocess.run(
            argv, env=dict(os.environ, CODEX_HOME=str(home), **SIDE_ENV[side]),
            stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        elapsed = (time.perf_counter() - t0) * 1000
        if done.returncode != 0:
            raise SystemExit(f"codex exited {done.returncode}: {done.stderr[-2000:]}")
        output = tool_output(server.requests)
        if "Script completed" not in output or " calls" not in output:
            raise SystemExit(f"{codex}: unexpected program output: {output[:500]!r}")
        return elapsed


def whole_process(vendor: Path, ours: Path, warm: Path, calls: int, runs: int) -> dict[str, Any]:
    binaries = {
        "codex_host": vendor / "bin" / "codex",
        "ours": ours / "bin" / "codex",
        "ours_warm": warm / "bin" / "codex",
    }
    result: dict[str, Any] = {}
    for mode, parallel in (("sequential", False), ("parallel", True)):
        code = program(calls, parallel)
        for side in SIDES:  # warm the caches, untimed
            run_turn(binaries[side], code, side)
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for r in range(runs):
            for side in rotated(SIDES, r):
                time.sleep(GAP_S)
                times[side].append(run_turn(binaries[side], code, side))
        medians = {side: round(statistics.median(times[side]), 1) for side in SIDES}
        # Each round ran the sides back to back: the difference within a round is
        # steadier than the medians' ratio when the machine's speed drifts.
        paired = {
            side: sorted(o - c for o, c in zip(times[side], times["codex_host"], strict=True))
            for side in ("ours", "ours_warm")
        }
        result[mode] = {
            "median_ms": medians,
            "paired_difference_ms": {
                side: {
                    "median": round(statistics.median(d), 1),
                    "rounds_ours_faster": sum(x < 0 for x in d),
                    "rounds": len(d),
                }
                for side, d in paired.items()
            },
            "ratio": round(medians["ours"] / medians["codex_host"], 3),
            "ratio_warm": round(medians["ours_warm"] / medians["codex_host"], 3),
            "meets_target": medians["ours"] <= medians["codex_host"],
            "meets_target_warm": medians["ours_warm"] <= medians["codex_host"],
        }
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int, children: bool = True) -> float:
    """CPU time of ``pid`` and (``children``) of the processes whose parent it is."""
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or (children and int(fields[1]) == pid):
            ticks += int(fields[11]) + int(fields[12])
    return ticks * _TICK_MS


async def _host_durations(
    address: str, calls: int, runs: int, pid: int
) -> tuple[dict[str, float], float]:
    """Median code_mode_host_duration_ns per program kind, in ms; and the host's CPU
    (with its engine workers) per nested call over the measured rounds, in µs."""
    import grpc

    from codemode.codex_host.wire.messages import SERVICE, pb

    def rpc(name: str, streaming: bool) -> Any:
        method = pb.methods[name]
        make = channel.unary_stream if streaming else channel.unary_unary
        return make(
            f"/{SERVICE}/{name}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.classes[method.response].FromString,
        )

    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), 60)
        events = rpc("OpenSession", True)(pb.OpenSessionRequest())
        sid = (await events.read()).opened.session_id
        calls_stream = rpc("SubscribeToToolCalls", True)(
            pb.SubscribeToToolCallsRequest(session_id=sid)
        )
        complete = rpc("CompleteToolCall", False)

        async def answer() -> None:
            async for call in calls_stream:
                await complete(
                    pb.CompleteToolCallRequest(
                        session_id=sid, invocation_id=call.invocation_id,
                        succeeded=pb.ToolCallSucceeded(output_json=b"{}"),
                    )
                )  # fmt: skip

        answering = asyncio.ensure_future(answer())
        tool = pb.ToolDefinition(
            name="noop", tool_name=pb.ToolName(name="noop"), description="does nothing",
            kind=pb.enums["ToolKind"]["TOOL_KIND_FUNCTION"],
        )  # fmt: skip
        execute = rpc("Execute", True)
        kinds = {
            "no_calls": program(0, False, "noop"),
            "sequential": program(calls, False, "noop"),
            "parallel": program(calls, True, "noop"),
        }
        found: dict[str, list[float]] = {k: [] for k in kinds}
        cpu_before = 0.0
        for i in range(runs + 1):
            if i == 1:
                cpu_before = _cpu_ms(pid)
            for kind, code in kinds.items():
                request = pb.ExecuteRequest(
                    session_id=sid, execution_id=f"{kind}-{i}", tool_call_id=f"c{i}",
                    source=code, enabled_tools=[tool], yield_time_ms=60_000,
                )  # fmt: skip
                outcome = [e async for e in execute(request)][-1].outcome
                if outcome.WhichOneof("outcome") != "completed" or outcome.completed.error_text:
                    raise SystemExit(f"{kind}: {outcome}")
                if i:  # the first round warms up
                    found[kind].append(outcome.code_mode_host_duration_ns / 1e6)
        cpu_us = (_cpu_ms(pid) - cpu_before) * 1000 / (runs * 2 * calls)
        answering.cancel()
        events.cancel()
    return {k: statistics.median(v) for k, v in found.items()}, cpu_us


def host_time(argv: list[str], calls: int, runs: int, side: str) -> dict[str, Any]:
    port = _free_port()
    proc = subprocess.Popen(
        [*argv, "--listen", f"grpc://127.0.0.1:{port}"], env={**os.environ, **SIDE_ENV[side]},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ms, cpu_us = asyncio.run(_host_durations(f"127.0.0.1:{port}", calls, runs, proc.pid))
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "program_ms": {k: round(v, 2) for k, v in ms.items()},
        "per_call_us": {
            mode: round((ms[mode] - ms["no_calls"]) / calls * 1000, 1)
            for mode in ("sequential", "parallel")
        },
        "cpu_us_per_call": round(cpu_us, 1),
    }


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def first_byte(argv: list[str], side: str) -> tuple[float, float]:
    """(ms from spawn to the host's first byte on stdout, its CPU ms by then)."""
    env = {**os.environ, **SIDE_ENV[side]}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*argv, "--listen", "grpc+stdio://"], env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_PREFACE)
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], 60)[0] or not os.read(proc.stdout.fileno(), 64):
            raise SystemExit(f"{argv[0]}: no answer to an HTTP/2 preface")
        elapsed = (time.perf_counter() - started) * 1000
        # A warm shim's process is the client; the host it was handed is the server's.
        warm = warm_words(Path(argv[0])) is not None and os.readlink(
            f"/proc/{proc.pid}/exe"
        ) == os.path.realpath(argv[0])  # (not gone cold: the launcher, a Python)
        return elapsed, (math.nan if warm else _cpu_ms(proc.pid, children=False))
    finally:
        proc.stdin.close()
        proc.wait(10)


def start(hosts: dict[str, list[str]], runs: int) -> dict[str, Any]:
    found: dict[str, list[tuple[float, float]]] = {side: [] for side in hosts}
    for i in range(runs + 1):
        for side in rotated(tuple(hosts), i):
            argv = hosts[side]
            time.sleep(GAP_S)  # as between turns: the warm server's spare is ready
            measured = first_byte(argv, side)
            if i:  # the first round warms the page cache
                found[side].append(measured)
    result: dict[str, Any] = {}
    for side, got in found.items():
        cpu = statistics.median(m[1] for m in got)
        result[side] = {
            "first_byte_ms": round(statistics.median(m[0] for m in got), 1),
            "cpu_ms": None if math.isnan(cpu) else round(cpu, 1),
        }
    theirs = result["codex_host"]["first_byte_ms"]
    result["ratio"] = round(result["ours"]["first_byte_ms"] / theirs, 1)
    result["ratio_warm"] = round(result["ours_warm"]["first_byte_ms"] / theirs, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="turns per side and mode")
    parser.add_argument("--calls", type=int, default=50, help="nested calls per program")
    args = parser.parse_args()
    vendor = cache_dir() / f"codex-{VERSION}" / VENDOR
    if not (vendor / "bin" / "codex").is_file():
        print(
            json.dumps(
                {
                    "skipped": f"no Codex {VERSION} build in {vendor}: run "
                    "bash scripts/setup-test-servers.sh (needs npm and the registry)"
                }
            )
        )
        return
    # One copy per checkout: the shim names this checkout's interpreter, and several
    # checkouts share the cache.
    key = hashlib.sha256(INTERPRETER.encode()).hexdigest()[:12]
    command = [INTERPRETER, "code-mode-host"]
    # A warm server of the benchmark's own (the shim names its socket), stopped at the end.
    runtime = tempfile.mkdtemp(prefix="cmb-")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    ours = vendor_with_our_host(vendor, vendor.parent / f"ours-bench-{key}", command)
    warm = vendor_with_our_host(
        vendor, vendor.parent / f"ours-bench-warm-{key}", command, warm=True
    )
    warm_shim = warm / "bin" / "codex-code-mode-host"
    if warm_words(warm_shim) is None:
        raise SystemExit("no C compiler: the warm shim could not be made")
    hosts = {
        "codex_host": [str(vendor / "bin" / "codex-code-mode-host")],
        "ours": command,
        "ours_warm": [str(warm_shim)],
    }
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        report = {
            "codex_version": VERSION,
            "calls": args.calls,
            "runs": args.runs,
            "start": start(hosts, max(args.runs, 5)),
            "whole_process": whole_process(vendor, ours, warm, args.calls, args.runs),
            # on TCP, where a host is never taken warm
            "host_time": {
                side: host_time(hosts[side], args.calls, args.runs, side)
                for side in ("codex_host", "ours")
            },
            "load_average": {
                "before": load_before,
                "after": [round(x, 2) for x in os.getloadavg()],
            },
        }
    finally:
        # The warm server the benchmark's first warm turn left (it would idle 15 minutes).
        start_warm.stop(place.socket_path())
        shutil.rmtree(runtime, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
