#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest (dev preset: unit, scenario and
# end-to-end tests), then the core tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (asan-ubsan preset), then the job-spec fuzzer for a
# bounded time (FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."

traces="${TESSERA_TRACES_DIR:-$(cd .. && pwd)/shared/traces}"
if [[ ! -d "$traces/alibaba-gpu-v2023-fgd" ]]; then
  echo "test: the public traces are not at $traces; set TESSERA_TRACES_DIR" >&2
  exit 2
fi

./scripts/setup.sh

echo "== dev build: every test"
cmake --preset dev -DTESSERA_TRACES_DIR="$traces"
cmake --build --preset dev
ctest --preset dev

echo "== fuzz the job-spec parser for ${FUZZ_SECONDS:-60} s"
./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"

echo "== asan-ubsan build: core tests"
cmake --preset asan-ubsan -DTESSERA_TRACES_DIR="$traces"
cmake --build --preset asan-ubsan --target core_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan-ubsan
