/* The CUDA limiter against the real driver, for a GPU machine: a driver-API program
 * (no runtime) with a handwritten PTX kernel that spins on clock64 for N cycles.
 *
 *   1. allocates device memory 1 GiB at a time until an allocation fails and reports
 *      where it stopped and what cuMemGetInfo says (under the limiter: the cap);
 *   2. runs the kernel back to back for half a second, then for a few seconds more and
 *      reports the kernel-time share of wall time over the latter (under the limiter:
 *      about TESSERA_CUDA_COMPUTE_PERCENT).
 *
 * Build (cuda.h from the toolkit, libcuda from the driver):
 *   gcc -O2 -std=c11 -I/usr/local/cuda/include limiter_check.c -o limiter_check -lcuda
 * Run:
 *   LD_PRELOAD=<build>/lib/libtessera_cuda_limiter.so TESSERA_CUDA_MEMORY_LIMIT_MIB=20480 \
 *     TESSERA_CUDA_COMPUTE_PERCENT=25 ./limiter_check [--max-gib N] [--seconds S] [--cycles C]
 * Prints key=value lines.
 *
 * Kernel time: one kernel's duration is calibrated first (launch and synchronise,
 * unpaced thanks to the limiter's 100 ms burst credit), then the share is
 * launches x duration / wall time. No events: cuda.h 13 maps cuEventElapsedTime to a
 * _v2 symbol that older drivers lack, and the limiter's own event use is what is
 * being checked. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char kSpinPtx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry spin(.param .u64 cycles)\n"
    "{\n"
    "  .reg .pred p;\n"
    "  .reg .b64 target, start, now, elapsed;\n"
    "  ld.param.u64 target, [cycles];\n"
    "  mov.u64 start, %clock64;\n"
    "LOOP:\n"
    "  mov.u64 now, %clock64;\n"
    "  sub.s64 elapsed, now, start;\n"
    "  setp.lt.s64 p, elapsed, target;\n"
    "  @p bra LOOP;\n"
    "  ret;\n"
    "}\n";

static double NowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    printf("error=%s returned %d\n", what, (int)r);
    return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  int max_gib = 256;
  double seconds = 3.0;
  unsigned long long cycles = 1000000ULL; /* about 0.5 ms at 2 GHz */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--max-gib") == 0) max_gib = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--cycles") == 0) cycles = strtoull(argv[i + 1], NULL, 10);
  }
  if (max_gib < 1 || max_gib > 4096 || seconds <= 0 || cycles == 0) {
    fprintf(stderr, "usage: limiter_check [--max-gib N] [--seconds S] [--cycles C]\n");
    return 2;
  }
  const char* cap = getenv("TESSERA_CUDA_MEMORY_LIMIT_MIB");
  const char* share = getenv("TESSERA_CUDA_COMPUTE_PERCENT");
  printf("memory_limit_mib=%s\ncompute_percent=%s\n", cap ? cap : "none", share ? share : "none");

  CUdevice device;
  CUcontext context;
  if (!Check(cuInit(0), "cuInit") || !Check(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !Check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !Check(cuCtxSetCurrent(context), "cuCtxSetCurrent")) {
    return 1;
  }
  char name[128] = "";
  cuDeviceGetName(name, (int)sizeof(name), device);
  printf("device=%s\n", name);

  /* 1. Memory: 1 GiB steps until refused. */
  size_t free_bytes = 0, total_bytes = 0;
  if (!Check(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo")) return 1;
  printf("before_free_mib=%zu\nbefore_total_mib=%zu\n", free_bytes >> 20, total_bytes >> 20);
  CUdeviceptr* held = calloc((size_t)max_gib, sizeof(CUdeviceptr));
  if (held == NULL) return 1;
  int allocated = 0;
  CUresult stop = CUDA_SUCCESS;
  for (; allocated < max_gib; ++allocated) {
    stop = cuMemAlloc(&held[allocated], (size_t)1 << 30);
    if (stop != CUDA_SUCCESS) break;
  }
  printf("allocated_gib=%d\nstopped_at_call=%d\nstop_code=%d\n", allocated,
         stop == CUDA_SUCCESS ? 0 : allocated + 1, (int)stop);
  if (Check(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo")) {
    printf("held_free_mib=%zu\nheld_total_mib=%zu\n", free_bytes >> 20, total_bytes >> 20);
  }
  for (int i = 0; i < allocated; ++i) cuMemFree(held[i]);
  free(held);
  if (Check(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo")) {
    printf("after_free_free_mib=%zu\n", free_bytes >> 20);
  }

  /* 2. Compute: back-to-back spin kernels. */
  CUmodule module;
  CUfunction spin;
  if (!Check(cuModuleLoadData(&module, kSpinPtx), "cuModuleLoadData") ||
      !Check(cuModuleGetFunction(&spin, module, "spin"), "cuModuleGetFunction")) {
    return 1;
  }
  void* params[] = {&cycles};
  /* Warm up (JIT, clocks), then calibrate one kernel's duration. */
  if (!Check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel") ||
      !Check(cuCtxSynchronize(), "cuCtxSynchronize")) {
    return 1;
  }
  const int calibration = 10;
  double t0 = NowSeconds();
  for (int i = 0; i < calibration; ++i) {
    cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    cuCtxSynchronize();
  }
  const double kernel_s = (NowSeconds() - t0) / calibration;
  printf("kernel_ms=%.3f\n", kernel_s * 1e3);

  /* Half a second first, so that the limiter's 100 ms burst credit is spent before the
   * measured window (the share below is the steady one). */
  t0 = NowSeconds();
  while (NowSeconds() - t0 < 0.5) {
    if (!Check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel")) {
      return 1;
    }
  }
  long long launches = 0;
  t0 = NowSeconds();
  while (NowSeconds() - t0 < seconds) {
    if (!Check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel")) {
      return 1;
    }
    ++launches;
  }
  cuCtxSynchronize();
  const double wall = NowSeconds() - t0;
  printf("launches=%lld\nwall_s=%.3f\nkernel_share_percent=%.1f\n", launches, wall,
         100.0 * (double)launches * kernel_s / wall);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(device);
  return 0;
}
