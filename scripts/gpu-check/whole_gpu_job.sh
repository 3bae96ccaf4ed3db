#!/usr/bin/env bash
# A whole GPU through `tessera up` on a GPU machine: one job asks for a GPU and runs a CUDA
# program (PyTorch where there is one, else nvidia-smi); one asks for none and must not
# reach any. Prints key=value lines and a verdict for each.
#   scripts/gpu-check/whole_gpu_job.sh BUILD_DIR
# Exits non-zero when the GPU job did not get its GPU or the GPU-less job reached one.
set -euo pipefail
bin="$(realpath "${1:?usage: whole_gpu_job.sh BUILD_DIR}")/tessera"
python="$(command -v python3 || true)"
data="$(mktemp -d "${TMPDIR:-/tmp}/tessera-gpu-job.XXXXXX")"
chmod 711 "$data"
"$bin" up --data "$data/cluster" --listen 127.0.0.1:0 >"$data/up.log" 2>&1 &
up_pid=$!
trap 'kill -TERM $up_pid 2>/dev/null; wait $up_pid 2>/dev/null; rm -rf "$data"' EXIT
url=""
for _ in $(seq 1 300); do
  url="$(sed -n 's/^  API: *//p' "$data/up.log" | head -1)"
  [[ -n "$url" ]] && break
  kill -0 "$up_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$url" ]]; then
  cat "$data/up.log" >&2
  echo "whole_gpu_verdict=FAILED: tessera up did not start"
  exit 1
fi
export TESSERA_SERVER="$url"
TESSERA_TOKEN="$(cat "$data/cluster/tokens/team-a.token")"
export TESSERA_TOKEN

# The probe: who runs it, which GPU device nodes it may open, and what CUDA sees.
cat >"$data/probe.sh" <<PROBE
echo uid=\$(id -u)
echo visible=\${CUDA_VISIBLE_DEVICES:-none}
for d in /dev/nvidia[0-9]*; do
  if (exec 3<>"\$d") 2>/dev/null; then echo "opens=\$d"; else echo "refused=\$d"; fi
done
if [ -x "$python" ] && "$python" -c 'import torch' 2>/dev/null; then
  "$python" -c '
import time, torch
n = torch.cuda.device_count()
print("cuda_devices=%d" % n)
if n:
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = x @ x
    torch.cuda.synchronize(); t = time.time()
    for _ in range(20): y = x @ x
    torch.cuda.synchronize(); dt = time.time() - t
    print("device=%s" % torch.cuda.get_device_name(0))
    print("bf16_tflops=%.0f" % (20 * 2 * 8192**3 / dt / 1e12))
' 2>&1 | tail -5
else
  nvidia-smi -L 2>&1 | sed 's/^/smi=/'
fi
PROBE
chmod 644 "$data/probe.sh"

run_job() {  # NAME GPUS
  local id
  id="$("$bin" submit --name "$1" --gpus "$2" -- /bin/sh "$data/probe.sh")"
  "$bin" wait --timeout 3m "$id" >/dev/null || true
  "$bin" logs "$id" 2>&1 | sed "s/^/$1./"
}
gpu="$(run_job gpu_job 1)"
none="$(run_job no_gpu_job 0)"
echo "$gpu"
echo "$none"
status=0
if grep -qE '^gpu_job\.(cuda_devices=1|smi=GPU 0)' <<<"$gpu"; then
  echo "whole_gpu_verdict=ok"
else
  echo "whole_gpu_verdict=FAILED: the GPU job did not see its GPU"
  status=1
fi
if grep -qE '^no_gpu_job\.(opens=|cuda_devices=[1-9]|smi=GPU)' <<<"$none"; then
  echo "no_gpu_verdict=FAILED: a job without GPUs reached one"
  status=1
else
  echo "no_gpu_verdict=ok"
fi
exit "$status"
