// A CUDA driver-API client for the limiter's tests and benchmark. It links nothing of
// CUDA: it dlopens libcuda.so.1 and finds entry points either with dlsym on that
// handle or, as the CUDA runtime does, through cuGetProcAddress_v2 (itself found with
// dlsym). Kernels are those of the fake libcuda: the first parameter is a duration in
// microseconds; kernel time is what the fake says it really spun. Prints key=value lines.
//
//   cuda_client alloc API VIA COUNT     1 GiB allocations until one fails or COUNT
//                                       (API: alloc pitch managed async pool create;
//                                       VIA: dlsym procaddr procaddr-ptsz, or
//                                       dlvsym: dlvsym(lib, name, "TESSERA_FAKE_1"),
//                                       dlvsym-dlsym: the C library's dlsym, found
//                                       with dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_..."),
//                                       dlmopen: dlsym on libcuda.so.1 dlmopen'ed into
//                                       a new namespace; prints which it got)
//   cuda_client hold COUNT              allocate 1 GiB at a time, print, hold until
//                                       stdin closes
//   cuda_client launch API VIA MICROS MILLIS [THREADS]  kernels of MICROS us back to
//                                       back for MILLIS ms from THREADS threads (1)
//                                       (API: kernel ex coop graph)
//   cuda_client init                    cuInit and one allocation through each path
//   cuda_client rtld-next               dlsym(RTLD_NEXT) still resolves from the caller
// Before the command, any of --setenv=NAME=VALUE, --putenv=NAME=VALUE and
// --unsetenv=NAME change the process's environment, in order.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "limiter/cuda_abi.h"

using namespace tessera_cuda;  // NOLINT

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

struct Driver {
  Fn_cuInit* init = nullptr;
  Fn_cuDeviceGet* device_get = nullptr;
  Fn_cuDevicePrimaryCtxRetain* retain = nullptr;
  Fn_cuCtxSetCurrent* set_current = nullptr;
  Fn_cuMemAlloc_v2* alloc = nullptr;
  Fn_cuMemAllocPitch_v2* alloc_pitch = nullptr;
  Fn_cuMemAllocManaged* alloc_managed = nullptr;
  Fn_cuMemAllocAsync* alloc_async = nullptr;
  Fn_cuMemAllocFromPoolAsync* alloc_pool = nullptr;
  Fn_cuMemCreate* create = nullptr;
  Fn_cuMemFree_v2* free = nullptr;
  Fn_cuMemFreeAsync* free_async = nullptr;
  Fn_cuMemRelease* release = nullptr;
  Fn_cuMemGetInfo_v2* get_info = nullptr;
  Fn_cuLaunchKernel* launch = nullptr;
  Fn_cuLaunchKernelEx* launch_ex = nullptr;
  Fn_cuLaunchCooperativeKernel* launch_coop = nullptr;
  Fn_cuGraphLaunch* graph_launch = nullptr;
  // The fake driver's count of kernel time really spent (absent from a real driver).
  long long (*fake_kernel_ns)() = nullptr;
};

std::int64_t NowUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "cuda_client: %s\n", why.c_str());
  std::exit(2);
}

using DlsymFn = void*(void*, const char*);

// How Find looks entry points up: `proc` (cuGetProcAddress) when set, else `lookup`
// on `lib`, else dlvsym with the fake driver's version.
struct Lookup {
  void* lib = nullptr;
  Fn_cuGetProcAddress_v2* proc = nullptr;
  cuuint64_t flags = 0;
  DlsymFn* lookup = nullptr;
};

// The C library's dlsym, asked of dlvsym by version (the default of this glibc, or an
// older base version).
DlsymFn* DlsymByVersion() {
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"}) {
    if (void* fn = dlvsym(RTLD_DEFAULT, "dlsym", version)) return reinterpret_cast<DlsymFn*>(fn);
  }
  Die("no dlsym by version");
}

// `name` is the base name the runtime asks cuGetProcAddress for; `exported` the symbol.
template <typename Fn>
void Find(const Lookup& how, const char* name, const char* exported, Fn*& out) {
  void* fn = nullptr;
  if (how.proc == nullptr) {
    fn = how.lookup != nullptr ? how.lookup(how.lib, exported)
                               : dlvsym(how.lib, exported, "TESSERA_FAKE_1");
  } else {
    CUdriverProcAddressQueryResult status = 0;
    if (how.proc(name, &fn, 13000, how.flags, &status) != CUDA_SUCCESS) fn = nullptr;
  }
  out = reinterpret_cast<Fn*>(fn);
}

void* PlainDlsym(void* lib, const char* name) { return dlsym(lib, name); }

Driver Load(const std::string& via) {
  void* lib = via == "dlmopen" ? dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL)
                               : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) Die(std::string("dlopen libcuda.so.1: ") + dlerror());
  if (via == "dlmopen") {
    Lmid_t lmid = -1;
    if (dlinfo(lib, RTLD_DI_LMID, &lmid) != 0) Die(std::string("dlinfo: ") + dlerror());
    std::printf("base_namespace=%d\n", lmid == LM_ID_BASE ? 1 : 0);
  }
  Fn_cuGetProcAddress_v2* proc = nullptr;
  cuuint64_t flags = 0;
  DlsymFn* lookup = &PlainDlsym;
  if (via == "procaddr" || via == "procaddr-ptsz") {
    proc = reinterpret_cast<Fn_cuGetProcAddress_v2*>(dlsym(lib, "cuGetProcAddress_v2"));
    if (proc == nullptr) Die("no cuGetProcAddress_v2");
    // As the CUDA runtime does next: cuGetProcAddress asked for itself, and that used.
    void* self = nullptr;
    CUdriverProcAddressQueryResult status = 0;
    if (proc("cuGetProcAddress", &self, 12000, 0, &status) != CUDA_SUCCESS || self == nullptr) {
      Die("cuGetProcAddress does not find itself");
    }
    proc = reinterpret_cast<Fn_cuGetProcAddress_v2*>(self);
    if (via == "procaddr-ptsz") flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  } else if (via == "dlvsym") {
    lookup = nullptr;
  } else if (via == "dlvsym-dlsym") {
    lookup = DlsymByVersion();
  } else if (via != "dlsym" && via != "dlmopen") {
    Die("unknown lookup " + via);
  }
  const Lookup how{lib, proc, flags, lookup};
  Driver d;
  Find(how, "cuInit", "cuInit", d.init);
  Find(how, "cuDeviceGet", "cuDeviceGet", d.device_get);
  Find(how, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", d.retain);
  Find(how, "cuCtxSetCurrent", "cuCtxSetCurrent", d.set_current);
  Find(how, "cuMemAlloc", "cuMemAlloc_v2", d.alloc);
  Find(how, "cuMemAllocPitch", "cuMemAllocPitch_v2", d.alloc_pitch);
  Find(how, "cuMemAllocManaged", "cuMemAllocManaged", d.alloc_managed);
  Find(how, "cuMemAllocAsync", "cuMemAllocAsync", d.alloc_async);
  Find(how, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", d.alloc_pool);
  Find(how, "cuMemCreate", "cuMemCreate", d.create);
  Find(how, "cuMemFree", "cuMemFree_v2", d.free);
  Find(how, "cuMemFreeAsync", "cuMemFreeAsync", d.free_async);
  Find(how, "cuMemRelease", "cuMemRelease", d.release);
  Find(how, "cuMemGetInfo", "cuMemGetInfo_v2", d.get_info);
  Find(how, "cuLaunchKernel", "cuLaunchKernel", d.launch);
  Find(how, "cuLaunchKernelEx", "cuLaunchKernelEx", d.launch_ex);
  Find(how, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", d.launch_coop);
  Find(how, "cuGraphLaunch", "cuGraphLaunch", d.graph_launch);
  d.fake_kernel_ns = reinterpret_cast<long long (*)()>(dlsym(lib, "tessera_fake_kernel_ns"));
  if (d.init == nullptr || d.alloc == nullptr || d.get_info == nullptr) Die("driver incomplete");
  return d;
}

void Start(const Driver& d) {
  if (const CUresult r = d.init(0); r != CUDA_SUCCESS) Die("cuInit: " + std::to_string(r));
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (d.device_get(&device, 0) != CUDA_SUCCESS || d.retain(&context, device) != CUDA_SUCCESS ||
      d.set_current(context) != CUDA_SUCCESS) {
    Die("no context");
  }
}

// One 1 GiB allocation through `api`; `key` is the pointer or handle to free.
struct Allocation {
  std::string api;
  unsigned long long key = 0;
};
alignas(64) unsigned char g_prop[64];  // an opaque CUmemAllocationProp for the fake
int g_pool = 0;

CUresult AllocateOne(const Driver& d, const std::string& api, Allocation* out) {
  out->api = api;
  CUdeviceptr ptr = 0;
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (api == "alloc") {
    r = d.alloc(&ptr, kGiB);
  } else if (api == "pitch") {
    size_t pitch = 0;
    r = d.alloc_pitch(&ptr, &pitch, 1 << 20, 1024, 4);
  } else if (api == "managed") {
    r = d.alloc_managed(&ptr, kGiB, CU_MEM_ATTACH_GLOBAL);
  } else if (api == "async") {
    r = d.alloc_async(&ptr, kGiB, nullptr);
  } else if (api == "pool") {
    r = d.alloc_pool(&ptr, kGiB, reinterpret_cast<CUmemoryPool>(&g_pool), nullptr);
  } else if (api == "create") {
    CUmemGenericAllocationHandle handle = 0;
    r = d.create(&handle, kGiB, reinterpret_cast<const CUmemAllocationProp*>(g_prop), 0);
    out->key = handle;
    return r;
  } else {
    Die("unknown allocation API " + api);
  }
  out->key = ptr;
  return r;
}

CUresult FreeOne(const Driver& d, const Allocation& a) {
  if (a.api == "create") return d.release(a.key);
  if (a.api == "async" || a.api == "pool") return d.free_async(a.key, nullptr);
  return d.free(a.key);
}

void PrintInfo(const Driver& d, const char* prefix) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  const CUresult r = d.get_info(&free_bytes, &total_bytes);
  std::printf("%s_result=%d\n%s_free_mib=%zu\n%s_total_mib=%zu\n", prefix, r, prefix,
              free_bytes >> 20, prefix, total_bytes >> 20);
}

int Alloc(const std::string& api, const std::string& via, int count) {
  const Driver d = Load(via);
  Start(d);
  std::vector<Allocation> held;
  int first_failure = 0;
  CUresult failure = CUDA_SUCCESS;
  for (int i = 1; i <= count; ++i) {
    Allocation a;
    const CUresult r = AllocateOne(d, api, &a);
    if (r != CUDA_SUCCESS) {
      first_failure = i;
      failure = r;
      break;
    }
    held.push_back(a);
  }
  std::printf("allocated=%zu\nfirst_failure=%d\nfailure_code=%d\n", held.size(), first_failure,
              failure);
  PrintInfo(d, "info");
  if (!held.empty()) {
    std::printf("free_one=%d\n", FreeOne(d, held.back()));
    held.pop_back();
    Allocation again;
    const CUresult r = AllocateOne(d, api, &again);
    std::printf("realloc_after_free=%d\n", r);
    if (r == CUDA_SUCCESS) held.push_back(again);
  }
  for (const Allocation& a : held) FreeOne(d, a);
  PrintInfo(d, "after_free");
  return 0;
}

int Hold(int count) {
  const Driver d = Load("procaddr");
  Start(d);
  std::vector<Allocation> held;
  CUresult last = CUDA_SUCCESS;
  for (int i = 0; i < count; ++i) {
    Allocation a;
    last = AllocateOne(d, "alloc", &a);
    if (last != CUDA_SUCCESS) break;
    held.push_back(a);
  }
  std::printf("allocated=%zu\nstop_code=%d\n", held.size(), last);
  std::fflush(stdout);
  char buffer[64];
  while (read(0, buffer, sizeof(buffer)) > 0) {
  }
  for (const Allocation& a : held) FreeOne(d, a);
  return 0;
}

int Launch(const std::string& api, const std::string& via, std::uint64_t micros,
           std::int64_t millis, int threads) {
  const Driver d = Load(via);
  Start(d);
  CUcontext context = nullptr;  // the primary context, made current in every thread
  if (d.retain(&context, 0) != CUDA_SUCCESS) Die("no context");
  std::atomic<std::int64_t> launches{0};
  // Kernel time: what the fake driver really spun where it says, else launches x MICROS.
  auto kernel_us = [&] {
    return d.fake_kernel_ns != nullptr ? d.fake_kernel_ns() / 1000
                                       : launches.load() * static_cast<std::int64_t>(micros);
  };
  const std::int64_t start = NowUs();
  const std::int64_t deadline = start + millis * 1000;
  const std::int64_t kernel_at_start = kernel_us();
  auto worker = [&] {
    if (d.set_current(context) != CUDA_SUCCESS) Die("no context");
    CUfunction f = reinterpret_cast<CUfunction>(&g_pool);
    std::uint64_t duration = micros;
    void* params[1] = {&duration};
    CUlaunchConfig config{1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, 0};
    while (NowUs() < deadline) {
      CUresult r = CUDA_ERROR_NOT_SUPPORTED;
      if (api == "kernel") {
        r = d.launch(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
      } else if (api == "ex") {
        r = d.launch_ex(&config, f, params, nullptr);
      } else if (api == "coop") {
        r = d.launch_coop(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params);
      } else if (api == "graph") {
        r = d.graph_launch(reinterpret_cast<CUgraphExec>(&duration), nullptr);
      }
      if (r != CUDA_SUCCESS) Die("launch: " + std::to_string(r));
      ++launches;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  // The second half of the run, after any burst credit is spent: the steady share.
  const std::int64_t half = start + millis * 500;
  while (NowUs() < half) usleep(1000);
  const std::int64_t half_start = NowUs();
  const std::int64_t kernel_at_half = kernel_us();
  for (std::thread& t : pool) t.join();
  const std::int64_t end = NowUs();
  const std::int64_t wall = end - start;
  const std::int64_t kernel_at_end = kernel_us();
  const std::int64_t kernel = kernel_at_end - kernel_at_start;
  const std::int64_t steady_wall = end - half_start;
  const std::int64_t steady_kernel = kernel_at_end - kernel_at_half;
  std::printf(
      "launches=%lld\nkernel_us=%lld\nwall_us=%lld\nshare_permille=%lld\n"
      "steady_kernel_us=%lld\nsteady_wall_us=%lld\nsteady_share_permille=%lld\n",
      static_cast<long long>(launches.load()), static_cast<long long>(kernel),
      static_cast<long long>(wall), static_cast<long long>(kernel * 1000 / wall),
      static_cast<long long>(steady_kernel), static_cast<long long>(steady_wall),
      static_cast<long long>(steady_wall > 0 ? steady_kernel * 1000 / steady_wall : 0));
  return 0;
}

int Init() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) Die("dlopen libcuda.so.1");
  auto* init = reinterpret_cast<Fn_cuInit*>(dlsym(lib, "cuInit"));
  auto* alloc = reinterpret_cast<Fn_cuMemAlloc_v2*>(dlsym(lib, "cuMemAlloc_v2"));
  auto* proc = reinterpret_cast<Fn_cuGetProcAddress_v2*>(dlsym(lib, "cuGetProcAddress_v2"));
  if (init == nullptr || alloc == nullptr || proc == nullptr) Die("driver incomplete");
  std::printf("init=%d\n", init(0));
  CUdeviceptr ptr = 0;
  std::printf("alloc=%d\n", alloc(&ptr, kGiB));
  void* fn = nullptr;
  std::printf("procaddr=%d\n", proc("cuMemAlloc", &fn, 13000, 0, nullptr));
  return 0;
}

int RtldNext() {
  void* next = dlsym(RTLD_NEXT, "cuMemGetInfo_v2");
  void* global = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
  std::printf("rtld_next_ok=%d\n", next != nullptr && next == global ? 1 : 0);
  return 0;
}

// Applies the leading --setenv/--putenv/--unsetenv options; returns the rest.
std::vector<std::string> ChangeEnvironment(std::vector<std::string> args) {
  size_t used = 0;
  for (; used < args.size(); ++used) {
    const std::string& arg = args[used];
    if (arg.rfind("--setenv=", 0) == 0) {
      const std::string assignment = arg.substr(9);
      const size_t equals = assignment.find('=');
      if (equals == std::string::npos) Die("expected --setenv=NAME=VALUE");
      setenv(assignment.substr(0, equals).c_str(), assignment.c_str() + equals + 1, 1);
    } else if (arg.rfind("--putenv=", 0) == 0) {
      putenv(strdup(arg.c_str() + 9));  // the environment keeps the string
    } else if (arg.rfind("--unsetenv=", 0) == 0) {
      unsetenv(arg.c_str() + 11);
    } else {
      break;
    }
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(used));
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      ChangeEnvironment(std::vector<std::string>(argv + 1, argv + argc));
  if (args.size() == 4 && args[0] == "alloc")
    return Alloc(args[1], args[2], std::atoi(args[3].c_str()));
  if (args.size() == 2 && args[0] == "hold") return Hold(std::atoi(args[1].c_str()));
  if ((args.size() == 5 || args.size() == 6) && args[0] == "launch") {
    return Launch(args[1], args[2], std::strtoull(args[3].c_str(), nullptr, 10),
                  std::atoll(args[4].c_str()), args.size() == 6 ? std::atoi(args[5].c_str()) : 1);
  }
  if (args.size() == 1 && args[0] == "init") return Init();
  if (args.size() == 1 && args[0] == "rtld-next") return RtldNext();
  Die("usage: see the header of cuda_client.cc");
}
