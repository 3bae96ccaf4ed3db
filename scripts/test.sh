#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest (ci preset: the dev build's tests,
# optimised without debug info or benchmarks, two at a time with the end-to-end tests
# one after another), then the job-spec fuzzer for a bounded time (FUZZ_SECONDS,
# default 60), then the core's tests (base, model, state, sched, plugins, api, sim,
# store, metrics: label `core`) again under AddressSanitizer and
# UndefinedBehaviorSanitizer (asan-ubsan preset).
set -euo pipefail
cd "$(dirname "$0")/.."

traces="${TESSERA_TRACES_DIR:-$(cd .. && pwd)/shared/traces}"
if [[ ! -d "$traces/alibaba-gpu-v2023-fgd" ]]; then
  echo "test: the public traces are not at $traces; set TESSERA_TRACES_DIR" >&2
  exit 2
fi

./scripts/setup.sh

echo "== ci build: every test"
cmake --preset ci -DTESSERA_TRACES_DIR="$traces"
cmake --build --preset ci
ctest --preset ci

echo "== fuzz the job-spec parser for ${FUZZ_SECONDS:-60} s"
./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"

echo "== asan-ubsan build: core tests"
cmake --preset asan-ubsan -DTESSERA_TRACES_DIR="$traces"
cmake --build --preset asan-ubsan --target core_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan-ubsan
