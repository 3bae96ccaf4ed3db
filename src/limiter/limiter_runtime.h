// The limiter's process-wide state inside the task: its configuration, the real driver
// (dlopen'ed by name or TESSERA_CUDA_REAL_LIBRARY, entry points found with the real
// dlsym), the memory ledger and the pacer. The configuration is read once, as the
// library is loaded (its constructor, before the program's main and constructors),
// from the environment the process was started with: later setenv, putenv or
// unsetenv change nothing. The rest is built once, on the first intercepted call;
// never destroyed (hooks may run during exit). Thread-safe after construction.
#ifndef TESSERA_LIMITER_LIMITER_RUNTIME_H_
#define TESSERA_LIMITER_LIMITER_RUNTIME_H_

#include <dlfcn.h>

#include <cstdint>

#include "limiter/cuda_abi.h"
#include "limiter/limiter_config.h"
#include "limiter/memory_ledger.h"

namespace tessera_limiter {

using namespace tessera_cuda;  // NOLINT: the ABI's names are the vocabulary here

// Real driver entry points; any may be null where the driver lacks it.
struct RealDriver {
  void* handle = nullptr;
  Fn_cuInit* cuInit = nullptr;
  Fn_cuCtxGetCurrent* cuCtxGetCurrent = nullptr;
  Fn_cuMemAlloc_v2* cuMemAlloc_v2 = nullptr;
  Fn_cuMemAllocPitch_v2* cuMemAllocPitch_v2 = nullptr;
  Fn_cuMemAllocManaged* cuMemAllocManaged = nullptr;
  Fn_cuMemAllocAsync* cuMemAllocAsync[2] = {};  // [0] legacy stream, [1] per-thread
  Fn_cuMemAllocFromPoolAsync* cuMemAllocFromPoolAsync[2] = {};
  Fn_cuMemCreate* cuMemCreate = nullptr;
  Fn_cuMemFree_v2* cuMemFree_v2 = nullptr;
  Fn_cuMemFreeAsync* cuMemFreeAsync[2] = {};
  Fn_cuMemRelease* cuMemRelease = nullptr;
  Fn_cuMemGetInfo_v2* cuMemGetInfo_v2 = nullptr;
  Fn_cuLaunchKernel* cuLaunchKernel[2] = {};
  Fn_cuLaunchKernelEx* cuLaunchKernelEx[2] = {};
  Fn_cuLaunchCooperativeKernel* cuLaunchCooperativeKernel[2] = {};
  Fn_cuGraphLaunch* cuGraphLaunch[2] = {};
  Fn_cuEventCreate* cuEventCreate = nullptr;
  Fn_cuEventRecord* cuEventRecord[2] = {};
  Fn_cuEventQuery* cuEventQuery = nullptr;
  Fn_cuEventSynchronize* cuEventSynchronize = nullptr;
  Fn_cuEventElapsedTime* cuEventElapsedTime = nullptr;
  Fn_cuEventDestroy_v2* cuEventDestroy_v2 = nullptr;
  Fn_cuStreamIsCapturing* cuStreamIsCapturing[2] = {};
  Fn_cuThreadExchangeStreamCaptureMode* cuThreadExchangeStreamCaptureMode = nullptr;
  Fn_cuGetProcAddress* cuGetProcAddress = nullptr;
  Fn_cuGetProcAddress_v2* cuGetProcAddress_v2 = nullptr;
};

class Pacer;

struct Runtime {
  LimiterConfig config;
  RealDriver real;
  // False when the configuration is malformed or the real driver cannot be loaded:
  // every hook then answers CUDA_ERROR_NOT_INITIALIZED.
  bool usable = false;
  MemoryLedger* ledger = nullptr;  // null: no memory cap
  Pacer* pacer = nullptr;          // null: no pacing
};

// The runtime, built on first use (thread-safe). Null only while it is being built
// on this thread (the driver's own start-up looking symbols up).
Runtime* GetRuntime();

// The configuration read at load (see above); read then if a hook runs first.
const LimiterConfig& LoadedConfig();

// The C library's dl functions, found without dlsym (next_definition.h): the limiter
// exports its own dlsym, dlvsym and dlmopen. Resolved at load; null where missing.
using DlsymFn = void*(void*, const char*) noexcept;
using DlvsymFn = void*(void*, const char*, const char*) noexcept;
using DlmopenFn = void*(Lmid_t, const char*, int) noexcept;
DlsymFn* RealDlsym();
DlvsymFn* RealDlvsym();
DlmopenFn* RealDlmopen();

// The hook standing in for a real entry point, or nullptr when `real_fn` is not one
// the limiter intercepts. Used by the dlsym and cuGetProcAddress hooks.
void* HookFor(const Runtime& runtime, void* real_fn);
// Fills the real-to-hook table (limiter_symbols.cc) once the driver is loaded.
void RegisterHooks(Runtime& runtime);

// Appends one line to TESSERA_CUDA_LIMITER_LOG when set (at most a few hundred lines
// per process); printf-style.
void LogLine(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::int64_t MonotonicNs();

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_LIMITER_RUNTIME_H_
