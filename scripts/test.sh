#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest (ci preset: the dev build's tests,
# optimised at -O1, a quarter faster to compile than -O2, with precompiled headers and
# without debug info or benchmarks; two at a time with the end-to-end tests one after
# another), then the job-spec fuzzer for a bounded time (FUZZ_SECONDS, default 30) and
# the Debian package check (scripts/package-check.sh) while the next build compiles, then the core's tests (base, model, state, sched,
# plugins, api, sim, store, metrics: label `core`) again under AddressSanitizer and
# UndefinedBehaviorSanitizer (asan-ubsan preset), whose build starts beside the ci tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# The public traces the tests read are in the repository (data/traces); TESSERA_TRACES_DIR
# points elsewhere. Passed to every configure, so a build folder set up earlier with
# another folder follows.
traces="${TESSERA_TRACES_DIR:-$PWD/data/traces}"
if [[ ! -d "$traces/alibaba-gpu-v2023-fgd" ]]; then
  echo "test: the public traces are not at $traces (data/traces of the repository," \
       "or TESSERA_TRACES_DIR)" >&2
  exit 2
fi
traces="$(cd "$traces" && pwd)"  # the tests run in the build folder

# ctest starts the tests it knows to be long first, from the run times of an earlier run
# (Testing/Temporary/CTestCostData.txt); a fresh clone has none and would run the tests in
# declaration order, the end-to-end ones, which run one after another, last: about 90 s
# more on 2 cores. Measured times of the long tests are kept in tests/ctest-costs (tests
# under half a second left out); a build folder with its own record keeps it.
seed_test_costs() {
  local dir="build/$1/Testing/Temporary"
  if [[ ! -f "$dir/CTestCostData.txt" ]]; then
    mkdir -p "$dir"
    cp "tests/ctest-costs/$1.txt" "$dir/CTestCostData.txt"
  fi
}

stage_start=$(date +%s)
# Prints how long the stage that just ended took, so a slow pass shows where.
stage_done() {
  local now
  now=$(date +%s)
  echo "test: $1 took $((now - stage_start)) s"
  stage_start=$now
}

./scripts/setup.sh
stage_done "setup"

echo "== ci build: every test"
cmake --preset ci -DTESSERA_TRACES_DIR="$traces"
cmake --build --preset ci
stage_done "the ci build"

# The sanitizer build starts beside the ci tests, two compiles at a time at the lowest
# priority: the tests leave much of the CPU idle (the end-to-end ones run one after
# another and mostly wait), and at nice 19 a compile takes only what they leave. It goes
# on with both cores once the tests are done.
cmake --preset asan-ubsan -DTESSERA_TRACES_DIR="$traces" > build/asan-ubsan-configure.log
nice -n 19 ninja -C build/asan-ubsan -j2 core_tests > build/asan-ubsan-early.log 2>&1 &
early_pid=$!
trap 'kill -TERM "$early_pid" 2>/dev/null || true' EXIT
seed_test_costs ci
ctest_rc=0
ctest --preset ci || ctest_rc=$?
kill -TERM "$early_pid" 2>/dev/null || true
wait "$early_pid" 2>/dev/null || true
trap - EXIT
stage_done "the ci tests"
if ((ctest_rc != 0)); then
  exit "$ctest_rc"
fi

# The fuzzer (one process, one core) and the Debian package check (the package from the
# ci build installed, a job run through its systemd units' command lines, purged: mostly
# waiting, as root or through sudo) run while the sanitizer build compiles; their output
# is printed once all are done.
echo "== fuzz the job-spec parser for ${FUZZ_SECONDS:-30} s, beside the asan-ubsan build"
mkdir -p build
fuzz_log=build/fuzz.log
./scripts/fuzz.sh "${FUZZ_SECONDS:-30}" > "$fuzz_log" 2>&1 &
fuzz_pid=$!
echo "== the Debian package: install, run a job through its units, purge (beside it too)"
package_log=build/package-check.log
./scripts/package-check.sh build/ci > "$package_log" 2>&1 &
package_pid=$!

echo "== asan-ubsan build: core tests (what the tests left of it)"
cmake --build --preset asan-ubsan --target core_tests
stage_done "the asan-ubsan build"
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
cat "$fuzz_log"
if ((fuzz_rc != 0)); then
  echo "test: the fuzzer failed (exit $fuzz_rc)" >&2
  exit "$fuzz_rc"
fi
package_rc=0
wait "$package_pid" || package_rc=$?
cat "$package_log"
if ((package_rc != 0)); then
  echo "test: the package check failed (exit $package_rc)" >&2
  exit "$package_rc"
fi
seed_test_costs asan-ubsan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan-ubsan
stage_done "the asan-ubsan tests"
