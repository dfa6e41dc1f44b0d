"""A real model server on 127.0.0.1 for tests: llama.cpp's ``llama-server`` or
llama-cpp-python's ``llama_cpp.server``, with the small GGUF that
``scripts/setup-local-model.sh`` cached under ``~/.cache/codemode`` (or
``$CODEMODE_CACHE``).

``find_local_model()`` says what is there (or why nothing is); ``LocalModelServer``
starts one on a free port and stops it. Nothing here downloads or builds anything, but
``scripts/test.sh`` starts the build in the background while the rest of the suite runs
and names its process in ``CODEMODE_LOCAL_MODEL_BUILD_PID``: ``find_local_model()`` then
waits for that build to end (at most ``CODEMODE_LOCAL_MODEL_WAIT`` seconds) before it
looks, and the tests that use a server go to a worker once that build has ended
(``build_running``; tests/xdist_order.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
# The npm release whose prebuilt llama.cpp libraries (and llama.cpp source) both servers use.
NODE_LLAMA_CPP_VERSION = "3.22.1"
SMOLLM2_VERSION = "0.1.2"
MODEL_NAME = "smollm2"
# The chat template llama-server is started with: SmolLM2 speaks ChatML, and this
# template (shipped with llama.cpp) is ChatML with Hermes-style <tool_call> blocks, so
# the server offers the tools to the model and parses its calls. With the GGUF's own
# template llama-server drops "tools" without a word.
TOOL_TEMPLATE = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"

Kind = Literal["llama-server", "llama-cpp-python"]


def cache_dir() -> Path:
    from codemode.locations.user_dirs import cache_home

    return cache_home()


@dataclass
class LocalModel:
    kind: Kind
    command: list[str]  # without the per-start flags (port, context size)
    model: Path
    # Where it starts: ggml looks for its CPU kernels (one library per x86-64 level) next
    # to the executable and in the working directory, and python's directory has none.
    cwd: Path | None = None


def _build_running(pid: int) -> bool:
    """Whether the background build is still running (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def build_running() -> bool:
    """Whether the background build scripts/test.sh started is still running."""
    pid = os.environ.get("CODEMODE_LOCAL_MODEL_BUILD_PID", "")
    return pid.isdigit() and _build_running(int(pid))


def wait_for_build() -> str | None:
    """Wait for the background build scripts/test.sh started, if any; a sentence when
    it outlasted ``CODEMODE_LOCAL_MODEL_WAIT`` seconds."""
    pid = os.environ.get("CODEMODE_LOCAL_MODEL_BUILD_PID", "")
    if not pid.isdigit():
        return None
    limit = float(os.environ.get("CODEMODE_LOCAL_MODEL_WAIT") or 2400)
    deadline = time.monotonic() + limit
    while _build_running(int(pid)):
        if time.monotonic() > deadline:
            return f"the local-model build (pid {pid}) was still running after {limit:.0f} s"
        time.sleep(1)
    return None


def find_local_model(prefer: Kind | None = None) -> LocalModel | str:
    """The cached server and model, or a sentence saying what is missing."""
    if (late := wait_for_build()) is not None:
        return late
    cache = cache_dir()
    model = cache / "models" / f"SmolLM2-135M-Instruct.Q4_1-{SMOLLM2_VERSION}.gguf"
    if not model.is_file():
        return f"no model at {model}: run scripts/setup-local-model.sh"
    server_dir = cache / f"llama-server-nlc-{NODE_LLAMA_CPP_VERSION}"
    venv = cache / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-nlc-{NODE_LLAMA_CPP_VERSION}"
    found: dict[Kind, LocalModel] = {}
    binary = server_dir / "bin" / "llama-server"
    if (server_dir / ".ok").is_file() and binary.is_file():
        found["llama-server"] = LocalModel("llama-server", [
            str(binary), "-m", str(model), "--jinja",
            "--chat-template-file", str(server_dir / "templates" / TOOL_TEMPLATE),
            "--alias", MODEL_NAME, "--no-webui",
        ], model)
    if (venv / ".ok").is_file():
        found["llama-cpp-python"] = LocalModel("llama-cpp-python", [
            str(venv / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(model),
            "--model_alias", MODEL_NAME, "--chat_format", "chatml-function-calling",
        ], model, cwd=server_dir / "bin")
    if prefer is not None:
        return found.get(prefer) or f"{prefer} is not built in {cache}: run " \
            "scripts/setup-local-model.sh"
    for kind in ("llama-server", "llama-cpp-python"):
        if kind in found:
            return found[kind]
    return f"no local model server built in {cache}: run scripts/setup-local-model.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalModelServer:
    """One server process; ``with LocalModelServer(found, n_ctx=2048) as server:``."""

    found: LocalModel
    n_ctx: int = 2048
    # One thread by default: on two cores shared with other work, ggml's second thread
    # waits for the first at every step, and generation collapses (measured here under
    # a load of ~8: 4 tokens/s with two threads, 50 with one; on a quiet machine two
    # threads win by ~15%: 145 against 128).
    threads: int = 1
    log: Path | None = None
    port: int = field(default_factory=free_port)
    load_s: float = 0.0
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _argv(self) -> list[str]:
        if self.found.kind == "llama-server":
            return [*self.found.command, "--host", "127.0.0.1", "--port", str(self.port),
                    "-c", str(self.n_ctx), "--parallel", "1", "-t", str(self.threads)]
        return [*self.found.command, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads)]

    def __enter__(self) -> LocalModelServer:
        out = open(self.log, "wb") if self.log else subprocess.DEVNULL
        env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
        start = time.monotonic()
        self._proc = subprocess.Popen(self._argv(), stdout=out, stderr=subprocess.STDOUT,
                                      env=env, cwd=self.found.cwd,
                                      start_new_session=True)
        try:
            self._wait_ready(start, timeout_s=120)
        except BaseException:
            self.stop()
            raise
        self.load_s = time.monotonic() - start
        return self

    def _wait_ready(self, start: float, timeout_s: float) -> None:
        url = f"http://127.0.0.1:{self.port}/v1/models"
        while time.monotonic() - start < timeout_s:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.found.kind} exited with {self._proc.returncode}"
                                   f" (log: {self.log})")
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.found.kind} not ready after {timeout_s} s (log: {self.log})")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()
