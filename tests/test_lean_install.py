"""The lean install (`pip install codemode`: the runtime with QuickJS, the built-in
tools and the sandbox) built into a fresh venv from this tree, with uv and its cache
(offline first): a ToolHost program runs with it, sandboxed, and nothing of the full
install (V8, httpx, the MCP SDK, the terminal UI) is there or imported."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Import names of the full install's packages (the `agent` extra and what it pulls in).
FULL_ONLY = ["py_mini_racer", "httpx", "httpx_sse", "mcp", "acp", "rich", "prompt_toolkit",
             "yaml", "tomlkit", "jsonschema"]

PROGRAM = """
import asyncio, importlib.util, json, sys
from codemode import ToolHost

async def main():
    with ToolHost(".") as host:
        @host.tool
        def price(sku: str) -> float:
            "A price."
            return {"A1": 2.5}[sku]

        result = await host.execute(
            "const p = await tools.price({sku: 'A1'});"
            "const s = await tools.shell({command: 'echo hi; touch /tmp/codemode-lean-x'})"
            ".catch(e => ({refused: e.message}));"
            "await tools.write_file({path: 'out.txt', content: String(p)});"
            "return {p, s}"
        )
        tool = host.model_tool()
    return {
        "value": result.value,
        "error": result.error and result.error.one_line(),
        "declared": "price(args: PriceArgs): Promise<number>;" in tool.description,
        "found": [m for m in FULL_ONLY if importlib.util.find_spec(m) is not None],
        "imported": sorted({m.split(".")[0] for m in sys.modules} & set(FULL_ONLY)),
    }

print(json.dumps(asyncio.run(main())))
""".replace("FULL_ONLY", repr(FULL_ONLY))


def _uv() -> str | None:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    found = shutil.which("uv") or next(
        iter(sorted(glob.glob(f"{cache}/codemode/uv-*/bin/uv"), reverse=True)), None
    )
    return found


def _lean_venv(root: Path) -> Path:
    """A venv with the lean install of this tree, or a skip saying why none can be made."""
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed (scripts/setup-runtime.sh fetches it)")
    venv = root / "venv"
    made = subprocess.run([uv, "venv", "-q", str(venv), "--python", sys.executable],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "-q", "--python", str(python), "--link-mode", "hardlink",
               str(REPO)]
    # offline first (uv's cache has every package: the setup installed them); online when
    # the cache is cold
    for extra in (["--offline"], []):
        done = subprocess.run([*install, *extra], capture_output=True, text=True, timeout=600)
        if done.returncode == 0:
            return python
    pytest.skip(f"the lean install could not be built here: {done.stderr.strip()[-300:]}")


def test_lean_install_runs_a_tool_host_without_the_full_install(tmp_path: Path) -> None:
    python = _lean_venv(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    marker = Path("/tmp/codemode-lean-x")
    marker.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CODEMODE_HOME"] = str(tmp_path / "home")
    ran = subprocess.run([str(python), "-c", PROGRAM], cwd=work, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["error"] is None, out
    assert out["value"]["p"] == 2.5
    assert (work / "out.txt").read_text() == "2.5"
    # the shell runs sandboxed here too: `touch /tmp/...` fails or is refused
    shell = out["value"]["s"]
    assert "refused" in shell or shell["exit_code"] != 0, shell
    assert not marker.exists()
    assert out["declared"] is True
    assert out["found"] == [] and out["imported"] == [], out

    # the agent's commands say what to install, with no traceback
    interpreter = python.parent / "interpreter"
    agent = subprocess.run([str(interpreter), "exec", "--provider", "openai", "hi"], cwd=work,
                           env={**env, "OPENAI_API_KEY": "x"}, capture_output=True, text=True,
                           timeout=120)
    assert agent.returncode == 1, agent.stderr
    assert "pip install 'codemode[agent]'" in agent.stderr
    assert "Traceback" not in agent.stderr
    # and `interpreter run` works as it is
    (work / "hello.js").write_text("console.log(6 * 7)")
    script = subprocess.run([str(interpreter), "run", "hello.js"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120)
    assert script.returncode == 0 and script.stdout.strip() == "42", script.stderr

    # the Codex code-mode host serves gRPC from the lean install: its two libraries (h2,
    # with its own hpack and hyperframe, and protobuf) are there, grpcio is not, and a
    # host started over stdio answers HTTP/2's preface with its SETTINGS
    names = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; "
         "print(sorted(d.metadata['Name'].lower() for d in m.distributions()))"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    dists = set(json.loads(names.stdout.replace("'", '"')))
    assert {"h2", "hpack", "hyperframe", "protobuf"} <= dists, dists
    assert not {"grpcio", "grpcio-tools"} & dists, dists
    host = subprocess.run(
        [str(interpreter), "code-mode-host", "--listen", "grpc+stdio://"], cwd=work, env=env,
        input=b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", capture_output=True, timeout=120,
    )  # fmt: skip
    assert host.returncode == 0 and host.stdout[3:4] == b"\x04", host.stderr[-2000:]
