#!/usr/bin/env bash
# Builds the job-spec fuzz target (fuzz/job_spec_fuzz.cc) with clang++, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, seeds its corpus from examples/*.yaml
# and fuzz/corpus/, and runs it for SECONDS (default 60). Exits non-zero when the
# fuzzer finds a crash, a leak, undefined behaviour or a broken round trip; the input
# is saved under BUILD/artifacts/.
#
# Usage: scripts/fuzz.sh [SECONDS]
# Environment: FUZZ_BUILD_DIR (default build/fuzz), FUZZ_CXX (default clang++),
#              FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=2").
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
build="${FUZZ_BUILD_DIR:-build/fuzz}"
cxx="${FUZZ_CXX:-clang++}"

if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (install clang and libclang-rt-dev)" >&2
  exit 2
fi

# The sources the target needs, compiled in this script so that it does not depend on
# the rest of the project configuring with clang.
sources=(
  src/base/status.cc src/base/strings.cc src/base/time_format.cc
  src/model/gpu_catalog.cc src/model/request.cc src/model/job.cc src/model/restart_policy.cc
  src/api/units.cc src/api/json_fields.cc src/api/job_codec.cc src/api/job_encoder.cc src/api/yaml_reader.cc
  src/api/restart_policy.cc src/api/job_relations.cc src/api/job_codec_relations.cc
  src/api/job_draft.cc src/api/container_spec.cc src/api/job_codec_container.cc
)
common=(-std=c++20 -stdlib=libstdc++ -O1 -g -fno-omit-frame-pointer
        -fsanitize=address,undefined -fno-sanitize-recover=undefined -Isrc
        -Wall -Wextra -Werror -Wpedantic -Wshadow -Wold-style-cast)

mkdir -p "$build/obj" "$build/corpus" "$build/seeds" "$build/artifacts"
binary="$build/job_spec_fuzz"

# Rebuild when any source or header the target could include is newer than the binary.
if [[ ! -x "$binary" ]] || [[ -n "$(find src/base src/model src/api fuzz -newer "$binary" \
      \( -name '*.cc' -o -name '*.h' \) -print -quit)" ]]; then
  echo "== building $binary with $cxx"
  objects=()
  pids=()
  for src in "${sources[@]}"; do
    obj="$build/obj/$(echo "$src" | tr '/' '_').o"
    objects+=("$obj")
    "$cxx" "${common[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
  done
  "$cxx" "${common[@]}" -fsanitize=fuzzer fuzz/job_spec_fuzz.cc "${objects[@]}" -lyaml-cpp \
    -o "$binary"
fi

cp examples/*.yaml fuzz/corpus/* "$build/seeds/"

echo "== fuzzing for ${seconds}s"
# shellcheck disable=SC2086
# The fuzzer's progress lines go to a log; its summary (or, on a finding, the end of
# the log) is printed.
log="$build/fuzz.log"
rc=0
"$binary" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -dict=fuzz/job_spec.dict -artifact_prefix="$build/artifacts/" -print_final_stats=1 \
  ${FUZZ_ARGS:-} "$build/corpus" "$build/seeds" >"$log" 2>&1 || rc=$?
if ((rc != 0)); then
  tail -n 60 "$log"
  echo "fuzz: the fuzzer failed (exit $rc); the input is in $build/artifacts/" >&2
  exit "$rc"
fi
grep -E '^(Done|stat::)' "$log"
