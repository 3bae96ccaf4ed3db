// A fake CUDA driver (built as libcuda.so.1) for the limiter's tests: one 80 GiB GPU.
// Allocations consume fake memory and return fake device pointers; cuMemGetInfo
// reports the fake card's total and free. With TESSERA_FAKE_CUDA_STATE naming a file,
// the card's used bytes live in that file (mapped shared), so several processes share
// one card. Events record CLOCK_MONOTONIC; a kernel launch busy-waits on the calling
// thread for as many microseconds as its first parameter (a uint64) says, so measured
// kernel time is real time. A graph "exec" handle points at such a duration too.
// cuGetProcAddress resolves names as the real driver does (_ptsz for per-thread
// streams, _v2 where one exists). Launches are synchronous: work is complete when the
// call returns. Unlike the real driver, whose exports carry no version, every export
// is in version TESSERA_FAKE_1 (fake_libcuda.map), so that dlvsym finds them (glibc's
// dlvsym finds no unversioned symbol of a library that has version tables).
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "limiter/cuda_abi.h"

using namespace tessera_cuda;  // NOLINT

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr std::uint64_t kTotalBytes = std::uint64_t{80} << 30;

std::int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Bytes in use on the fake card: shared between processes when a state file is named.
std::uint64_t* UsedCounter() {
  static std::uint64_t* const counter = [] {
    static std::uint64_t local = 0;
    const char* path = getenv("TESSERA_FAKE_CUDA_STATE");
    if (path == nullptr || *path == '\0') return &local;
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0) return &local;
    void* map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return map == MAP_FAILED ? &local : static_cast<std::uint64_t*>(map);
  }();
  return counter;
}

bool Consume(std::uint64_t bytes) {
  std::uint64_t* used = UsedCounter();
  std::uint64_t now = __atomic_load_n(used, __ATOMIC_SEQ_CST);
  do {
    if (bytes > kTotalBytes || now > kTotalBytes - bytes) return false;
  } while (!__atomic_compare_exchange_n(used, &now, now + bytes, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
  return true;
}

void Give(std::uint64_t bytes) { __atomic_fetch_sub(UsedCounter(), bytes, __ATOMIC_SEQ_CST); }

std::mutex g_mu;
std::unordered_map<std::uint64_t, std::uint64_t> g_pointers;  // fake pointer -> bytes
std::unordered_map<std::uint64_t, std::uint64_t> g_handles;   // cuMemCreate handle -> bytes
std::uint64_t g_next_pointer = 0x7f0000000000ULL;
std::uint64_t g_next_handle = 1;
std::atomic<bool> g_initialised{false};
int g_primary_context = 0;
int g_module = 0;
int g_function = 0;
std::atomic<std::int64_t> g_kernel_ns{0};  // kernel time as spun (longer when preempted)
thread_local CUcontext t_context = nullptr;
thread_local CUstreamCaptureMode t_capture_mode = 0;

struct FakeEvent {
  std::int64_t ns = 0;
  bool recorded = false;
};

CUresult AllocatePointer(CUdeviceptr* dptr, std::uint64_t bytes) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Consume(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  *dptr = g_next_pointer;
  g_pointers[g_next_pointer] = bytes;
  g_next_pointer += (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  return CUDA_SUCCESS;
}

CUresult FreePointer(CUdeviceptr dptr) {
  std::uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const auto it = g_pointers.find(dptr);
    if (it == g_pointers.end()) return CUDA_ERROR_INVALID_VALUE;
    bytes = it->second;
    g_pointers.erase(it);
  }
  Give(bytes);
  return CUDA_SUCCESS;
}

// The "kernel": spins for params[0] microseconds.
CUresult RunKernel(void** params) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (params == nullptr || params[0] == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t micros = 0;
  std::memcpy(&micros, params[0], sizeof(micros));
  const std::int64_t start = NowNs();
  const std::int64_t until = start + static_cast<std::int64_t>(micros) * 1000;
  std::int64_t now = start;
  while (now < until) now = NowNs();
  g_kernel_ns.fetch_add(now - start);
  return CUDA_SUCCESS;
}

}  // namespace

// Not a CUDA entry point: the kernel time this process really spun, for the test
// client (a kernel preempted on a busy machine runs longer than asked).
FAKE_EXPORT long long tessera_fake_kernel_ns() { return g_kernel_ns.load(); }

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  g_initialised = true;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr || ordinal != 0) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr || device != 0) return CUDA_ERROR_INVALID_VALUE;
  *context = reinterpret_cast<CUcontext>(&g_primary_context);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  t_context = context;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = t_context;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (name == nullptr || length <= 0 || device != 0) return CUDA_ERROR_INVALID_VALUE;
  std::strncpy(name, "Fake GPU 80GB", static_cast<size_t>(length) - 1);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  return module != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *module = reinterpret_cast<CUmodule>(&g_module);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char*) {
  if (function == nullptr || module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *function = reinterpret_cast<CUfunction>(&g_function);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  return AllocatePointer(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                        size_t height, unsigned int) {
  if (pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pitch = (width + 511) / 512 * 512;
  return AllocatePointer(dptr, std::uint64_t{*pitch} * height);
}
FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) {
  return AllocatePointer(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) {
  return AllocatePointer(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocatePointer(dptr, bytes);
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return FreePointer(dptr); }
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return FreePointer(dptr); }
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                 const CUmemAllocationProp* prop, unsigned long long) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr || prop == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Consume(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mu);
  *handle = g_next_handle++;
  g_handles[*handle] = size;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const auto it = g_handles.find(handle);
    if (it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
    bytes = it->second;
    g_handles.erase(it);
  }
  Give(bytes);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t used = __atomic_load_n(UsedCounter(), __ATOMIC_SEQ_CST);
  *total_bytes = kTotalBytes;
  *free_bytes = used < kTotalBytes ? kTotalBytes - used : 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, unsigned int, unsigned int,
                                    CUstream, void** params, void**) {
  return RunKernel(params);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction, void** params,
                                      void**) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return RunKernel(params);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction, unsigned int, unsigned int, unsigned int,
                                               unsigned int, unsigned int, unsigned int,
                                               unsigned int, CUstream, void** params) {
  return RunKernel(params);
}
FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec graph, CUstream) {
  void* params[1] = {graph};
  return RunKernel(params);
}

FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *event = reinterpret_cast<CUevent>(new FakeEvent());
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto* fake = reinterpret_cast<FakeEvent*>(event);
  fake->ns = NowNs();
  fake->recorded = true;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent event) {
  return event == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) { return cuEventQuery(event); }
FAKE_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent stop) {
  if (ms == nullptr || start == nullptr || stop == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const auto* a = reinterpret_cast<FakeEvent*>(start);
  const auto* b = reinterpret_cast<FakeEvent*>(stop);
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(static_cast<double>(b->ns - a->ns) / 1e6);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  delete reinterpret_cast<FakeEvent*>(event);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUstreamCaptureMode previous = t_capture_mode;
  t_capture_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult* status);
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                      cuuint64_t flags);

namespace {

template <typename Fn>
void* Address(Fn* fn) {
  return reinterpret_cast<void*>(fn);
}

// The driver's own table, as the real one has (no dlsym: it must not depend on how
// the process resolves symbols).
void* FindEntry(const std::string& name) {
  static const std::unordered_map<std::string, void*> table = {
      {"cuInit", Address(&cuInit)},
      {"cuDriverGetVersion", Address(&cuDriverGetVersion)},
      {"cuDeviceGet", Address(&cuDeviceGet)},
      {"cuDevicePrimaryCtxRetain", Address(&cuDevicePrimaryCtxRetain)},
      {"cuCtxSetCurrent", Address(&cuCtxSetCurrent)},
      {"cuCtxGetCurrent", Address(&cuCtxGetCurrent)},
      {"cuCtxSynchronize", Address(&cuCtxSynchronize)},
      {"cuModuleLoadData", Address(&cuModuleLoadData)},
      {"cuModuleGetFunction", Address(&cuModuleGetFunction)},
      {"cuMemAlloc_v2", Address(&cuMemAlloc_v2)},
      {"cuMemAllocPitch_v2", Address(&cuMemAllocPitch_v2)},
      {"cuMemAllocManaged", Address(&cuMemAllocManaged)},
      {"cuMemAllocAsync", Address(&cuMemAllocAsync)},
      {"cuMemAllocFromPoolAsync", Address(&cuMemAllocFromPoolAsync)},
      {"cuMemFree_v2", Address(&cuMemFree_v2)},
      {"cuMemFreeAsync", Address(&cuMemFreeAsync)},
      {"cuMemCreate", Address(&cuMemCreate)},
      {"cuMemRelease", Address(&cuMemRelease)},
      {"cuMemGetInfo_v2", Address(&cuMemGetInfo_v2)},
      {"cuLaunchKernel", Address(&cuLaunchKernel)},
      {"cuLaunchKernelEx", Address(&cuLaunchKernelEx)},
      {"cuLaunchCooperativeKernel", Address(&cuLaunchCooperativeKernel)},
      {"cuGraphLaunch", Address(&cuGraphLaunch)},
      {"cuEventCreate", Address(&cuEventCreate)},
      {"cuEventRecord", Address(&cuEventRecord)},
      {"cuEventQuery", Address(&cuEventQuery)},
      {"cuEventSynchronize", Address(&cuEventSynchronize)},
      {"cuEventElapsedTime", Address(&cuEventElapsedTime)},
      {"cuEventDestroy_v2", Address(&cuEventDestroy_v2)},
      {"cuStreamSynchronize", Address(&cuStreamSynchronize)},
      {"cuStreamIsCapturing", Address(&cuStreamIsCapturing)},
      {"cuThreadExchangeStreamCaptureMode", Address(&cuThreadExchangeStreamCaptureMode)},
      {"cuGetProcAddress", Address(&cuGetProcAddress)},
      {"cuGetProcAddress_v2", Address(&cuGetProcAddress_v2)},
  };
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  // As the real driver: the per-thread-stream variant when asked for (this fake has
  // none: its streams are all the same), then the _v2 ABI where the caller's version
  // knows it, then the plain name.
  // The CUDA version each _v2 entry point appeared in: older callers get the original.
  static const std::unordered_map<std::string, int> v2_since = {
      {"cuMemAlloc", 3020},       {"cuMemAllocPitch", 3020}, {"cuMemFree", 3020},
      {"cuMemGetInfo", 3020},     {"cuEventDestroy", 4000},  {"cuDevicePrimaryCtxRelease", 11000},
      {"cuGetProcAddress", 12000}};
  const std::string base = symbol;
  const auto v2 = v2_since.find(base);
  const std::string candidates[] = {
      (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 ? base + "_ptsz" : "",
      v2 != v2_since.end() && cuda_version >= v2->second ? base + "_v2" : "", base};
  for (const std::string& name : candidates) {
    if (name.empty()) continue;
    if (void* fn = FindEntry(name)) {
      *pfn = fn;
      break;
    }
  }
  if (status != nullptr) {
    *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return *pfn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                      cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}
