#!/bin/sh
# The CUDA limiter against the real driver on a GPU machine: builds limiter_check.c and
# runs it without the limiter, then under it (20 GiB cap with 25 % and 50 % compute,
# and 10 %), printing key=value lines per run.
#   scripts/gpu-check/limiter_check.sh BUILD_DIR [OUT_DIR]
# BUILD_DIR holds lib/libtessera_cuda_limiter.so (cmake --build ... --target tessera);
# LIMITER_CHECK_ARGS adds flags (--cycles C, --seconds S, --max-gib N).
set -eu
build=$(cd "${1:?usage: limiter_check.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
limiter="$build/lib/libtessera_cuda_limiter.so"
[ -f "$limiter" ] || { echo "limiter_check: no $limiter" >&2; exit 1; }

cuda_include=""
for dir in /usr/local/cuda/include /usr/local/cuda-*/include /usr/include; do
  if [ -f "$dir/cuda.h" ]; then cuda_include=$dir; break; fi
done
[ -n "$cuda_include" ] || { echo "limiter_check: no cuda.h found" >&2; exit 1; }
stubs=$(dirname "$cuda_include")/lib64/stubs
# libcuda.so comes with the driver's development link or the toolkit's stub (whose
# SONAME, libcuda.so.1, is resolved to the driver at run time).
gcc -O2 -std=c11 -I"$cuda_include" "$here/limiter_check.c" -o "$out/limiter_check" -lcuda 2>/dev/null ||
  gcc -O2 -std=c11 -I"$cuda_include" "$here/limiter_check.c" -o "$out/limiter_check" \
      -L"$stubs" -lcuda

run() {
  name=$1; shift
  echo "== $name"
  # shellcheck disable=SC2086 # LIMITER_CHECK_ARGS: extra flags, word-split on purpose
  env "$@" "$out/limiter_check" --seconds 3 ${LIMITER_CHECK_ARGS:-} | sed "s/^/$name./"
}
run no_limiter TESSERA_CHECK=1
run cap20g_25pct LD_PRELOAD="$limiter" TESSERA_CUDA_MEMORY_LIMIT_MIB=20480 \
    TESSERA_CUDA_COMPUTE_PERCENT=25 TESSERA_CUDA_LIMITER_LOG="$out/limiter.log"
run cap20g_50pct LD_PRELOAD="$limiter" TESSERA_CUDA_MEMORY_LIMIT_MIB=20480 \
    TESSERA_CUDA_COMPUTE_PERCENT=50 TESSERA_CUDA_LIMITER_LOG="$out/limiter.log"
run share_10pct LD_PRELOAD="$limiter" TESSERA_CUDA_COMPUTE_PERCENT=10 \
    TESSERA_CUDA_LIMITER_LOG="$out/limiter.log"
echo "== limiter log ($out/limiter.log)"
cat "$out/limiter.log" 2>/dev/null || true
