"""The real Codex CLI in tests: its linux x64 build (cached by scripts/setup-test-servers.sh
in $CODEMODE_CACHE/codex-VERSION), with its own code-mode host or with ours beside it, run
for whole turns against the scripted model server (Responses wire)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codemode.codex_host.warm.beside import vendor_with_our_host
from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer

VENDOR = "node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl"
INTERPRETER = str(Path(sys.executable).parent / "interpreter")
# A model Codex knows (its metadata offers apply_patch and code mode).
MODEL = "gpt-5.5"


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMODE_CACHE", Path.home() / ".cache" / "codemode"))


def codex_vendor(version: str) -> Path:
    """Codex's vendor folder (its binary and code-mode host), or skip saying why."""
    folder = cache_dir() / f"codex-{version}" / VENDOR
    if not (folder / "bin" / "codex").is_file():
        log = cache_dir() / f"codex-{version}" / "install.log"
        why = log.read_text(errors="replace").strip()[-300:] if log.is_file() else "never run"
        pytest.skip(
            f"Codex CLI {version} is not installed in {log.parent} "
            f"(scripts/setup-test-servers.sh fetches it; its install.log: {why})"
        )
    return folder


def newest_codex_version() -> str:
    """The version npm's registry tags ``latest`` for ``@openai/codex``, or skip saying why
    (no npm, no registry reachable)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: cannot ask the registry for the newest @openai/codex")
    try:
        found = subprocess.run(
            [npm, "view", "@openai/codex", "dist-tags.latest", "--fetch-retries=0"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("npm's registry did not answer in 60 s (offline?)")
    version = found.stdout.strip()
    if found.returncode != 0 or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        lines = [line for line in (found.stderr or found.stdout).splitlines() if line.strip()]
        why = "; ".join(lines[:3])[:400]
        pytest.skip(f"npm's registry is not reachable (offline?): {why}")
    return version


def installed_codex(version: str) -> Path:
    """Codex ``version``'s vendor folder, installed into the cache as
    scripts/setup-test-servers.sh installs the versions it names, or skip saying why."""
    if f"{platform.system()}-{platform.machine()}" != "Linux-x86_64":
        pytest.skip("the Codex builds the tests run are linux x86_64 ones")
    folder = cache_dir() / f"codex-{version}"
    if not (folder / VENDOR / "bin" / "codex").is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm not found: cannot install Codex {version}")
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "install.log", "w") as log:
            try:
                subprocess.run(
                    [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                     "--loglevel=error", f"@openai/codex@{version}-linux-x64"],
                    stdout=log, stderr=subprocess.STDOUT, timeout=600,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                log.write("npm install took more than 600 s\n")
    return codex_vendor(version)


def with_our_host(version: str, *host_args: str, warm: bool = False) -> Path:
    """A copy of Codex's vendor folder whose ``codex-code-mode-host`` execs ours (with
    ``warm``: the shim whose compiled client hands the session to the warm server,
    ``codemode.warm``)."""
    vendor = codex_vendor(version)
    tag = "-".join(host_args) or "default"
    command = [INTERPRETER, "code-mode-host", *host_args]
    dest = vendor.parent / f"ours-{tag}{'-warm' if warm else ''}"
    return vendor_with_our_host(vendor, dest, command, warm=warm)


Step = dict[str, Any] | Callable[[str], dict[str, Any]]


def exec_call(code: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "exec", "freeform": True, "arguments": code}]}


def wait_call(cell_id: str, *, terminate: bool = False, yield_ms: int = 20_000) -> dict[str, Any]:
    args: dict[str, Any] = {"cell_id": cell_id, "yield_time_ms": yield_ms}
    if terminate:
        args["terminate"] = True
    return {"tool_calls": [{"name": "wait", "arguments": args}]}


def cell_of(output: str) -> str:
    m = re.search(r"cell ID (\S+)", output)
    assert m, f"no cell id in {output[:300]!r}"
    return m.group(1).rstrip(".")


def tool_outputs(request: RecordedRequest) -> list[Any]:
    items = request.body.get("input") or []
    return [
        i.get("output")
        for i in items
        if isinstance(i, dict) and str(i.get("type")).endswith("_output")
    ]


def output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(p.get("text", "") for p in output if isinstance(p, dict))


@dataclass
class Turn:
    rc: int
    events: list[dict[str, Any]]
    outputs: list[Any]  # every tool output the model was sent, in order
    stderr: str
    workspace: Path  # a copy of the files the turn left
    ran_in: str  # the folder it ran in (gone now; reported paths name it)


def _write_config(home: Path, base_url: str) -> None:
    """Codex's config in ``home``: the scripted model on the Responses wire, no approvals,
    workspace-write."""
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "scripted"\n'
        'approval_policy = "never"\nsandbox_mode = "workspace-write"\n'
        "check_for_update_on_startup = false\nsuppress_unstable_features_warning = true\n\n"
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{base_url}"\n'
        'wire_api = "responses"\n',
        encoding="utf-8",
    )


@contextmanager
def _homes() -> Iterator[tuple[Path, Path]]:
    # Codex refuses to set up its sandbox helper under the temporary folder.
    base = cache_dir() / "bench-homes"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory(dir=base) as home:
        yield Path(ws), Path(home)


def run_turn(
    vendor: Path, steps: list[Step], *, timeout_s: float = 240, codex_args: tuple[str, ...] = ()
) -> Turn:
    """``codex exec --enable code_mode_only --enable code_mode_host`` (and ``codex_args``)
    for one turn whose model replies are ``steps`` (a step may read the last tool output),
    then "done"."""
    queue = list(steps)

    def responder(request: RecordedRequest) -> object:
        if not queue:
            return {"text": "done"}
        step = queue.pop(0)
        if callable(step):
            outputs = tool_outputs(request)
            return step(output_text(outputs[-1]) if outputs else "")
        return step

    with _homes() as (ws, home), ScriptedModelServer(responder) as server:
        _write_config(home, server.base_url)
        env = dict(os.environ, CODEX_HOME=str(home))
        argv = [
            str(vendor / "bin" / "codex"), "exec", "--enable", "code_mode_only",
            "--enable", "code_mode_host", *codex_args, "--skip-git-repo-check", "--json",
            "-C", str(ws), "run the programs",
        ]  # fmt: skip
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        last = server.requests[-1] if server.requests else None
        outputs = tool_outputs(last) if last is not None else []
        files = {p.name: p.read_text() for p in ws.iterdir() if p.is_file()}
        ws_copy = Path(tempfile.mkdtemp(prefix="codex-turn-"))
        for name, text in files.items():
            (ws_copy / name).write_text(text)
        return Turn(proc.returncode, events, outputs, proc.stderr, ws_copy, str(ws))


_VOLATILE = [
    (re.compile(r"Wall time [\d.]+ seconds"), "Wall time N seconds"),
    (re.compile(r'"chunk_id":"[^"]*"'), '"chunk_id":"X"'),
    (re.compile(r'"wall_time_seconds":[\d.e-]+'), '"wall_time_seconds":N'),
    (re.compile(r"Wall time: [\d.]+ seconds"), "Wall time: N seconds"),
    (re.compile(r"Chunk ID: \w+"), "Chunk ID: X"),
    # Where in a line an engine puts an error's column differs (V8: the `new`, QuickJS:
    # the constructor); the line is the same.
    (re.compile(r"(exec_main\.mjs:\d+):\d+"), r"\1:C"),
]


def normalized(value: Any) -> Any:
    """A tool output or reported item with timings and random ids taken out."""
    text = json.dumps(value, sort_keys=True)
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return json.loads(text)


def reported_items(turn: Turn) -> list[Any]:
    """The items ``codex exec --json`` reported as completed, without their ids, in a
    stable order (calls made at once complete in any order)."""
    items = []
    for event in turn.events:
        if event.get("type") == "item.completed":
            item = dict(event["item"])
            item.pop("id", None)
            if item.get("type") == "error":
                continue  # warnings about the scripted model's metadata
            # Codex 0.148 sometimes reports a command's item before its output arrived
            # (either host); the output itself is compared in what the model was sent.
            item.pop("aggregated_output", None)
            items.append(normalized(json.loads(json.dumps(item).replace(turn.ran_in, "WS"))))
    return sorted(items, key=lambda i: json.dumps(i, sort_keys=True))


class JsonRpc:
    """The client side of ``codex app-server``'s JSON-RPC (JSON lines on stdio)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.next_id = 1
        self.seen: list[dict[str, Any]] = []

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"method": method} | ({"params": params} if params is not None else {}))

    def request(self, method: str, params: Any) -> Any:
        rid = self.next_id
        self.next_id += 1
        self._send({"id": rid, "method": method, "params": params})
        reply = self._until(lambda m: m.get("id") == rid and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def until(self, method: str) -> dict[str, Any]:
        return self._until(lambda m: m.get("method") == method)

    def _until(self, want: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            message = json.loads(line)
            self.seen.append(message)
            if want(message):
                return message
        raise AssertionError(f"app-server ended; last messages: {self.seen[-5:]}")


@contextmanager
def app_server(
    vendor: Path, host_port: int, script: list[Any]
) -> Iterator[tuple[JsonRpc, ScriptedModelServer]]:
    with _homes() as (_ws, home), ScriptedModelServer(script) as server:
        _write_config(home, server.base_url)
        proc = subprocess.Popen(
            [str(vendor / "bin" / "codex"), "app-server",
             "--code-mode-host", f"http://127.0.0.1:{host_port}",
             "--enable", "code_mode_only", "--enable", "code_mode_host"],
            env=dict(os.environ, CODEX_HOME=str(home)), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            yield JsonRpc(proc), server
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
