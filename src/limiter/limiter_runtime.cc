#include "limiter/limiter_runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "limiter/next_definition.h"
#include "limiter/pacer.h"

namespace tessera_limiter {
namespace {

// The environment the process started with: what the loader passes to constructors
// (glibc), not environ, which a constructor that ran before ours may have replaced.
char** g_start_env = nullptr;
const LimiterConfig* g_config = nullptr;
pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

const char* StartEnv(const char* name) {
  char** env = g_start_env != nullptr ? g_start_env : environ;
  const size_t length = strlen(name);
  for (; env != nullptr && *env != nullptr; ++env) {
    if (strncmp(*env, name, length) == 0 && (*env)[length] == '=') return *env + length + 1;
  }
  return nullptr;
}

void ReadConfig() { g_config = new LimiterConfig(ParseLimiterConfig(&StartEnv)); }

void* Next(const char* name) {
  return FindNextDefinition(reinterpret_cast<const void*>(&Next), name);
}

std::atomic<Runtime*> g_runtime{nullptr};
pthread_once_t g_once = PTHREAD_ONCE_INIT;
thread_local bool t_building = false;
std::atomic<int> g_log_fd{-1};
std::atomic<int> g_log_lines{0};
constexpr int kMaxLogLines = 500;

template <typename Fn>
void Resolve(void* handle, const char* name, Fn*& out) {
  out = reinterpret_cast<Fn*>(RealDlsym()(handle, name));
}

// Per-thread-default-stream variants fall back to the legacy ones where missing.
template <typename Fn>
void ResolvePair(void* handle, const char* name, const char* ptsz_name, Fn* (&out)[2]) {
  Resolve(handle, name, out[0]);
  Resolve(handle, ptsz_name, out[1]);
  if (out[1] == nullptr) out[1] = out[0];
}

void LoadDriver(Runtime& rt) {
  RealDriver& r = rt.real;
  void* h = r.handle;
  Resolve(h, "cuInit", r.cuInit);
  Resolve(h, "cuCtxGetCurrent", r.cuCtxGetCurrent);
  Resolve(h, "cuMemAlloc_v2", r.cuMemAlloc_v2);
  Resolve(h, "cuMemAllocPitch_v2", r.cuMemAllocPitch_v2);
  Resolve(h, "cuMemAllocManaged", r.cuMemAllocManaged);
  ResolvePair(h, "cuMemAllocAsync", "cuMemAllocAsync_ptsz", r.cuMemAllocAsync);
  ResolvePair(h, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
              r.cuMemAllocFromPoolAsync);
  Resolve(h, "cuMemCreate", r.cuMemCreate);
  Resolve(h, "cuMemFree_v2", r.cuMemFree_v2);
  ResolvePair(h, "cuMemFreeAsync", "cuMemFreeAsync_ptsz", r.cuMemFreeAsync);
  Resolve(h, "cuMemRelease", r.cuMemRelease);
  Resolve(h, "cuMemGetInfo_v2", r.cuMemGetInfo_v2);
  ResolvePair(h, "cuLaunchKernel", "cuLaunchKernel_ptsz", r.cuLaunchKernel);
  ResolvePair(h, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", r.cuLaunchKernelEx);
  ResolvePair(h, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
              r.cuLaunchCooperativeKernel);
  ResolvePair(h, "cuGraphLaunch", "cuGraphLaunch_ptsz", r.cuGraphLaunch);
  Resolve(h, "cuEventCreate", r.cuEventCreate);
  ResolvePair(h, "cuEventRecord", "cuEventRecord_ptsz", r.cuEventRecord);
  Resolve(h, "cuEventQuery", r.cuEventQuery);
  Resolve(h, "cuEventSynchronize", r.cuEventSynchronize);
  Resolve(h, "cuEventElapsedTime", r.cuEventElapsedTime);
  Resolve(h, "cuEventDestroy_v2", r.cuEventDestroy_v2);
  ResolvePair(h, "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz", r.cuStreamIsCapturing);
  Resolve(h, "cuThreadExchangeStreamCaptureMode", r.cuThreadExchangeStreamCaptureMode);
  Resolve(h, "cuGetProcAddress", r.cuGetProcAddress);
  Resolve(h, "cuGetProcAddress_v2", r.cuGetProcAddress_v2);
}

bool CanMeasure(const RealDriver& r) {
  return r.cuCtxGetCurrent != nullptr && r.cuEventCreate != nullptr &&
         r.cuEventRecord[0] != nullptr && r.cuEventQuery != nullptr &&
         r.cuEventSynchronize != nullptr && r.cuEventElapsedTime != nullptr &&
         r.cuEventDestroy_v2 != nullptr;
}

void LogExit() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || !rt->usable) return;
  if (rt->ledger != nullptr) {
    LogLine("exit: device memory held %llu of %llu bytes",
            static_cast<unsigned long long>(rt->ledger->held()),
            static_cast<unsigned long long>(rt->ledger->cap()));
  }
  if (rt->pacer != nullptr) {
    LogLine("exit: %lld paced launches, kernel time %lld us, slept %lld us",
            static_cast<long long>(rt->pacer->launches()),
            static_cast<long long>(rt->pacer->charged_ns() / 1000),
            static_cast<long long>(rt->pacer->slept_ns() / 1000));
  }
}

void Build() {
  t_building = true;
  auto* rt = new Runtime();
  rt->config = LoadedConfig();
  if (!rt->config.log_path.empty()) {
    g_log_fd.store(
        open(rt->config.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  }
  if (!rt->config.ok()) {
    // One line, whatever the log setting: the task must see why CUDA refuses.
    fprintf(stderr,
            "tessera-cuda-limiter: malformed %s; every CUDA call fails with "
            "CUDA_ERROR_NOT_INITIALIZED\n",
            rt->config.error.c_str());
    LogLine("malformed %s", rt->config.error.c_str());
  } else if ((rt->real.handle = dlopen(rt->config.real_library.c_str(), RTLD_NOW | RTLD_LOCAL)) ==
             nullptr) {
    const char* why = dlerror();
    LogLine("cannot load %s: %s", rt->config.real_library.c_str(), why ? why : "unknown");
    // Nothing to enforce: stay out of the way (lookups return the program's own
    // driver functions). With limits set, CUDA is refused rather than run unlimited.
    rt->usable = !rt->config.caps_memory() && !rt->config.paces();
  } else {
    LoadDriver(*rt);
    if (rt->config.paces() && !CanMeasure(rt->real)) {
      LogLine("%s lacks the event functions pacing needs; refusing CUDA",
              rt->config.real_library.c_str());
    } else {
      if (rt->config.caps_memory()) rt->ledger = new MemoryLedger(rt->config.memory_limit_bytes);
      if (rt->config.paces()) rt->pacer = new Pacer(rt->real, rt->config.compute_percent);
      RegisterHooks(*rt);
      rt->usable = true;
      LogLine("pid %d: memory cap %llu MiB, compute %d%%, driver %s", static_cast<int>(getpid()),
              static_cast<unsigned long long>(rt->config.memory_limit_bytes >> 20),
              rt->config.compute_percent, rt->config.real_library.c_str());
      atexit(&LogExit);
    }
  }
  g_runtime.store(rt, std::memory_order_release);
  t_building = false;
}

}  // namespace

Runtime* GetRuntime() {
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) return rt;
  if (t_building) return nullptr;
  pthread_once(&g_once, &Build);
  return g_runtime.load(std::memory_order_acquire);
}

const LimiterConfig& LoadedConfig() {
  pthread_once(&g_config_once, &ReadConfig);
  return *g_config;
}

DlsymFn* RealDlsym() {
  static DlsymFn* const real = reinterpret_cast<DlsymFn*>(Next("dlsym"));
  return real;
}

DlvsymFn* RealDlvsym() {
  static DlvsymFn* const real = reinterpret_cast<DlvsymFn*>(Next("dlvsym"));
  return real;
}

DlmopenFn* RealDlmopen() {
  static DlmopenFn* const real = reinterpret_cast<DlmopenFn*>(Next("dlmopen"));
  return real;
}

void LogLine(const char* format, ...) {
  const int fd = g_log_fd.load(std::memory_order_relaxed);
  if (fd < 0 || g_log_lines.fetch_add(1, std::memory_order_relaxed) >= kMaxLogLines) return;
  char line[512];
  int n = snprintf(line, sizeof(line), "tessera-cuda-limiter: ");
  va_list args;
  va_start(args, format);
  const int m = vsnprintf(line + n, sizeof(line) - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  n = m < 0 ? n : n + m;
  if (n > static_cast<int>(sizeof(line)) - 2) n = static_cast<int>(sizeof(line)) - 2;
  line[n++] = '\n';
  // One write per line: lines of concurrent processes sharing the file never interleave.
  [[maybe_unused]] const ssize_t written = write(fd, line, static_cast<size_t>(n));
}

namespace {

// At load, before the program's constructors and main: the configuration, and the
// real dl functions (so that no hook looks them up later).
void ReadAtLoad() {
  (void)LoadedConfig();
  (void)RealDlsym();
  (void)RealDlvsym();
  (void)RealDlmopen();
}

#ifdef __GLIBC__
// glibc passes constructors the process's argc, argv and starting environment.
__attribute__((constructor)) void LoadLimiter(int /*argc*/, char** /*argv*/, char** envp) {
  g_start_env = envp;
  ReadAtLoad();
}
#else
__attribute__((constructor)) void LoadLimiter() { ReadAtLoad(); }
#endif

}  // namespace

std::int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace tessera_limiter
