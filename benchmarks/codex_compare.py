"""The same code-mode turn in codemode and in the Codex CLI, whole process, printed as JSON.

    .venv/bin/python benchmarks/codex_compare.py [--runs N] [--calls N]

One turn: the model's first reply is one code-mode program that makes 50 sandboxed shell
calls (``echo call-I``), the second is a final message. It runs twice per tool: the calls
awaited one after another (``sequential``) and all in one ``Promise.all`` (``parallel``).
Both sides run the whole process (``interpreter exec`` / ``codex exec``) against the
scripted model server (a real HTTP server on 127.0.0.1, Responses wire), in a fresh
workspace and a fresh home each run, alternating so that both see the same load:

- codemode: ``interpreter exec --code-mode --full-auto`` (workspace-write, no approval),
  the program calls ``tools.shell({command})``;
- Codex: ``codex exec`` with ``features.code_mode`` and ``features.code_mode_only``,
  ``sandbox_mode = "workspace-write"``, ``approval_policy = "never"``; the program calls
  ``tools.exec_command({cmd})`` as Codex's own tool declaration shows it (a login shell
  by default). A second Codex variant passes ``login: false`` (a plain ``bash -c``, as
  codemode's shell runs): ``codex_plain_shell``.

One untimed turn per side warms the caches first (codemode runs with Python's bytecode
cache, as an installed package has it, whatever PYTHONDONTWRITEBYTECODE says). Each run
is checked: two model requests, and the program's output (sent back to the
model) holds all the calls' results. Before timing, a sandbox probe runs once on each
side: a program that tries to write outside the workspace and the temporary folder; the
JSON says whether the write was refused.

Figures, per side: ``median_ms`` (wall) and ``cpu_median_ms`` (CPU of the process and
everything it waited for: engine workers, sandboxes, shells; steadier than wall time on a
busy machine), for ``no_calls`` (the same turn with a program making no call: process
start, session, one program), ``sequential`` and ``parallel``; the ratios Codex / codemode;
``program_median_ms``: how long the program itself ran, as each side tells the model
(Codex to 0.1 s); and ``per_call_ms`` / ``per_call_cpu_ms``: (turn - no_calls) / calls,
what one sandboxed call costs beyond the start. ``load_average`` says how busy the machine was.

The Codex binary: $CODEX_BIN, else the one
``bash scripts/setup-test-servers.sh`` caches in
$CODEMODE_CACHE (default ~/.cache/codemode)/codex-VERSION, else ``codex`` on PATH.
Without one it prints ``{"skipped": REASON}``. Target (issue 14): >= 6x faster than Codex.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer

CODEX_VERSION = os.environ.get("CODEX_CLI_VERSION", "0.169.0")
VENDOR = "node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/bin/codex"
TARGET_RATIO = 6.0
Side = Literal["codemode", "codex", "codex_plain_shell"]
SIDES: tuple[Side, ...] = ("codemode", "codex", "codex_plain_shell")


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMODE_CACHE", Path.home() / ".cache" / "codemode"))


def find_codex() -> Path | None:
    if os.environ.get("CODEX_BIN"):
        return Path(os.environ["CODEX_BIN"])
    cached = cache_dir() / f"codex-{CODEX_VERSION}" / VENDOR
    if cached.is_file():
        return cached
    found = shutil.which("codex")
    return Path(found) if found else None


def shell_call(side: Side, command: str) -> str:
    """One shell call in the side's own tool API, as JavaScript."""
    if side == "codemode":
        return f"tools.shell({{command: {command}}})"
    login = ", login: false" if side == "codex_plain_shell" else ""
    return f"tools.exec_command({{cmd: {command}{login}}})"


def program(side: Side, calls: int, parallel: bool) -> str:
    """The model's program: CALLS shell calls, then one line with the count and the last."""
    call = shell_call(side, "`echo call-${i}`")
    if parallel:
        body = (
            f"const rs = await Promise.all(Array.from({{length: {calls}}}, (_, i) => {call}));\n"
            "const out = rs.map((r) => r.output.trim());\n"
        )
    else:
        body = (
            f"const out = [];\nfor (let i = 0; i < {calls}; i++) {{\n"
            f"  const r = await {call};\n  out.push(r.output.trim());\n}}\n"
        )
    report = "`${out.length} calls; last: ${out[out.length - 1]}`"
    emit = "console.log" if side == "codemode" else "text"  # Codex's exec has no console
    return body + f"{emit}({report});\n"


def probe_program(side: Side, target: Path) -> str:
    command = json.dumps(f"echo x > {target}; echo rc=$?")
    return f"const r = await {shell_call(side, command)};\n" + (
        "console.log(r.output);\n" if side == "codemode" else "text(r.output);\n"
    )


def script(code: str) -> list[dict[str, object]]:
    return [
        {"tool_calls": [{"name": "exec", "freeform": True, "arguments": code}]},
        {"text": "done"},
    ]


def tool_output(requests: list[RecordedRequest]) -> str:
    """The text the program's result put before the model in the second request."""
    if len(requests) != 2:
        raise RuntimeError(f"expected 2 model requests, saw {len(requests)}")
    items = requests[1].body.get("input") or []
    outputs = [i for i in items if isinstance(i, dict) and str(i.get("type")).endswith("_output")]
    return json.dumps([o.get("output") for o in outputs])


# How long the program itself ran, as each side reports it to the model.
_PROGRAM_TIME = (
    (re.compile(r"\[\d+ tool calls?, (\d+) ms\]"), 1.0),  # codemode
    (re.compile(r"Wall time ([\d.]+) seconds"), 1000.0),  # Codex (to 0.1 s)
)


def program_ms(output: str) -> float | None:
    for pattern, scale in _PROGRAM_TIME:
        if m := pattern.search(output):
            return float(m.group(1)) * scale
    return None


@contextmanager
def homes() -> Iterator[tuple[Path, Path]]:
    """A fresh workspace and a fresh home. The home is outside the temporary folder:
    Codex refuses to create its sandbox helper (``codex-linux-sandbox``, an alias of its
    own binary in CODEX_HOME) under it, and every sandboxed command then fails."""
    base = cache_dir() / "bench-homes"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory(dir=base) as home:
        yield Path(ws), Path(home)


def command(
    side: Side, codex: Path | None, base_url: str, ws: Path, home: Path
) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if side == "codemode":
        interpreter = str(Path(sys.executable).parent / "interpreter")
        env["CODEMODE_HOME"] = str(home)
        # Python's bytecode cache, as an installed package has it (pip compiles at install):
        # with PYTHONDONTWRITEBYTECODE set, as on some CI machines, every start would
        # compile ~400 modules again.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        argv = [
            interpreter, "exec", "--code-mode", "--full-auto", "-C", str(ws), "-m", "bench-model",
            "-c", "model_provider=scripted",
            "-c", f"model_providers.scripted.base_url={base_url}",
            "-c", "model_providers.scripted.wire_api=responses",
            "run the program",
        ]
        return argv, env
    assert codex is not None
    (home / "config.toml").write_text(
        'model = "bench-model"\nmodel_provider = "scripted"\n'
        'approval_policy = "never"\nsandbox_mode = "workspace-write"\n'
        "check_for_update_on_startup = false\nsuppress_unstable_features_warning = true\n\n"
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{base_url}"\n'
        'wire_api = "responses"\n\n[features]\ncode_mode = true\ncode_mode_only = true\n',
        encoding="utf-8",
    )
    env["CODEX_HOME"] = str(home)
    return [str(codex), "exec", "--skip-git-repo-check", "-C", str(ws), "run the program"], env


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def run_turn(side: Side, codex: Path | None, code: str) -> tuple[float, float, str]:
    """One whole-process turn: its wall time and CPU time in ms (the process and all it
    waited for: engine hosts, sandboxes, shells) and the program's output as the model
    saw it."""
    with homes() as (ws, home), ScriptedModelServer(script(code)) as server:
        argv, env = command(side, codex, server.base_url, ws, home)
        cpu0, t0 = _children_cpu_ms(), time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=ws, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        elapsed, cpu = (time.perf_counter() - t0) * 1000, _children_cpu_ms() - cpu0
        if done.returncode != 0:
            raise RuntimeError(f"{side} exited {done.returncode}: {done.stderr[-2000:]}")
        return elapsed, cpu, tool_output(server.requests)


def sandbox_probe(side: Side, codex: Path | None) -> dict[str, object]:
    """Whether a write outside the workspace and the temporary folder is refused."""
    outside = Path(tempfile.mkdtemp(dir=cache_dir(), prefix="bench-outside-"))
    target = outside / "escaped"
    try:
        _, _, output = run_turn(side, codex, probe_program(side, target))
        return {"write_outside_refused": not target.exists(), "output": output[:300]}
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@dataclass
class Figures:
    """Medians per side of one kind of turn."""

    wall: dict[Side, float]
    cpu: dict[Side, float]
    program: dict[Side, float | None]  # as the side reported it to the model

    def to_json(self) -> dict[str, object]:
        return {"median_ms": self.wall, "cpu_median_ms": self.cpu,
                "program_median_ms": self.program}


def measure(codex: Path, calls: int, parallel: bool, runs: int) -> Figures:
    """RUNS turns per side, the sides alternating so that all see the same load; each
    turn's output is checked."""
    walls: dict[Side, list[float]] = {side: [] for side in SIDES}
    cpus: dict[Side, list[float]] = {side: [] for side in SIDES}
    programs: dict[Side, list[float]] = {side: [] for side in SIDES}
    for _ in range(runs):
        for side in SIDES:
            ms, cpu, output = run_turn(side, codex, program(side, calls, parallel))
            # A login shell may print its profile's warnings before the echo.
            last = f"call-{calls - 1}" if calls else ""
            if f"{calls} calls; last: " not in output or last not in output:
                raise SystemExit(f"{side}: program output was {output[:500]!r}")
            walls[side].append(ms)
            cpus[side].append(cpu)
            if (inner := program_ms(output)) is not None:
                programs[side].append(inner)
    return Figures(
        wall={side: round(statistics.median(walls[side]), 1) for side in SIDES},
        cpu={side: round(statistics.median(cpus[side]), 1) for side in SIDES},
        program={
            side: round(statistics.median(programs[side]), 1) if programs[side] else None
            for side in SIDES
        },
    )


def compare(figures: Figures, startup: Figures, calls: int) -> dict[str, object]:
    """The ratios Codex / codemode, and what one more call costs over a turn without."""
    wall, cpu, inner = figures.wall, figures.cpu, figures.program
    ours, ours_inner = wall["codemode"], inner["codemode"]
    codex_inner = inner["codex"]
    return {
        **figures.to_json(),
        "ratio_vs_codex": round(wall["codex"] / ours, 2),
        "ratio_vs_codex_plain_shell": round(wall["codex_plain_shell"] / ours, 2),
        "meets_6x": wall["codex"] / ours >= TARGET_RATIO,
        "cpu_ratio_vs_codex": round(cpu["codex"] / cpu["codemode"], 2),
        "cpu_ratio_vs_codex_plain_shell": round(cpu["codex_plain_shell"] / cpu["codemode"], 2),
        "program_ratio_vs_codex": (
            round(codex_inner / ours_inner, 2) if codex_inner and ours_inner else None
        ),
        "per_call_ms": {
            side: round((wall[side] - startup.wall[side]) / calls, 2) for side in SIDES
        },
        "per_call_cpu_ms": {
            side: round((cpu[side] - startup.cpu[side]) / calls, 2) for side in SIDES
        },
    }


def warm_runs() -> int:
    """How many commands codemode's warm server (for the timed side's environment) ran."""
    _, env = command("codemode", None, "http://127.0.0.1:9", Path("/"), Path("/"))
    done = subprocess.run(
        [sys.executable, "-c",
         "from codemode.warm import place; print(place.served(place.socket_path()))"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    return int(done.stdout.strip() or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per side and mode")
    parser.add_argument("--calls", type=int, default=50, help="shell calls per program")
    args = parser.parse_args()
    codex = find_codex()
    if codex is None:
        print(json.dumps({"skipped": "no Codex binary: run bash "
                          "scripts/setup-test-servers.sh "
                          "(needs npm and the registry) or set CODEX_BIN"}))
        return
    version = subprocess.run([str(codex), "--version"], capture_output=True, text=True).stdout
    load_before = os.getloadavg()
    sandbox = {side: sandbox_probe(side, codex) for side in SIDES}
    report: dict[str, object] = {
        "codex": {"binary": str(codex), "version": version.strip(),
                  "config": {"features.code_mode": True, "features.code_mode_only": True,
                             "sandbox_mode": "workspace-write", "approval_policy": "never"}},
        "codemode": "interpreter exec --code-mode --full-auto (workspace-write, approval never)",
        "wire": "responses", "calls": args.calls, "runs": args.runs,
        "sandbox": sandbox,
        "notes": [
            "Codex's own sandbox (its bundled bubblewrap plus codex-linux-sandbox) runs here "
            "as root, given a CODEX_HOME outside the temporary folder (under it Codex "
            "refuses to create the codex-linux-sandbox helper and every command fails)",
            "codex: exec_command as the model is shown it (login shell by default); "
            "codex_plain_shell: login: false, a plain bash -c as codemode runs",
        ],
    }
    for side in SIDES:  # warm caches (page cache, Python bytecode), untimed
        run_turn(side, codex, program(side, args.calls, parallel=False))
    # codemode's first turn left its warm server (docs/warm.md): the timed turns are warm
    # unless CODEMODE_WARM=0; the report says how many were.
    served_before = warm_runs()
    startup = measure(codex, 0, False, args.runs)
    report["no_calls"] = {"what": "the same turn with a program making no shell call: "
                          "process start, session, one program, two model requests",
                          **startup.to_json()}
    for mode in ("sequential", "parallel"):
        figures = measure(codex, args.calls, mode == "parallel", args.runs)
        report[mode] = compare(figures, startup, args.calls)
    report["codemode_warm_turns"] = warm_runs() - served_before
    report["load_average"] = {"before": [round(x, 2) for x in load_before],
                              "after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
