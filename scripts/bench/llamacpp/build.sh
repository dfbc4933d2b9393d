#!/usr/bin/env bash
# Usage: build.sh <tools-dir>  (node-llama-cpp installed there by the bench)
# Compiles llama-bench and llama-batched-bench offline: the llama.cpp source is the git bundle
# shipped inside the node-llama-cpp npm package, compiled against that package's prebuilt shared
# libraries (the same binaries node-llama-cpp runs). Needs g++ (about 10 s per tool on 2 cores).
# llama-batched-bench needs libllama-common's argument parser; if it does not build, the bench
# reports why and goes on without it.
set -euo pipefail
D=$(cd "$1" && pwd)
B=$D/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
S=$D/llama.cpp-src
[ -d "$S" ] || git clone -q "$D/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$S"
mkdir -p "$D/bin"
for f in "$B"/*.so; do ln -sf "$f" "$D/bin/"; done # ggml loads its CPU backend variants from the executable's folder
LIBS=("$B/libllama-common.so" "$B"/libllama.v*.so "$B"/libggml.v*.so "$B/libggml-base.so")
INC=(-I"$S/include" -I"$S/ggml/include" -I"$S/common" -I"$S/vendor")
build() { # name, sources...
  local name=$1
  shift
  nice g++ -O2 -DNDEBUG -std=c++17 "${INC[@]}" "$@" -o "$D/bin/$name.tmp" "${LIBS[@]}" -Wl,-rpath,"$B" -pthread
  mv "$D/bin/$name.tmp" "$D/bin/$name"
  echo "built $D/bin/$name"
}
[ -x "$D/bin/llama-bench" ] || build llama-bench -I"$S/tools/llama-bench" "$S/tools/llama-bench/llama-bench.cpp" "$S/tools/llama-bench/main.cpp"
if [ ! -x "$D/bin/llama-batched-bench" ]; then
  src=$(ls "$S"/tools/batched-bench/*.cpp "$S"/examples/batched-bench/*.cpp 2>/dev/null || true)
  [ -n "$src" ] || { echo "no batched-bench source in this llama.cpp release" >&2; exit 3; }
  build llama-batched-bench $src || exit 3
fi
