// How callers reach the hooks. Programs linked with -lcuda bind to the limiter's
// exports directly (it is preloaded). The CUDA runtime instead dlopens libcuda.so.1,
// looks up cuGetProcAddress with dlsym on that handle (which would bypass a preloaded
// library) and obtains every other entry point through it. So the limiter exports
// dlsym too: a lookup that yields one of the real driver functions it intercepts
// yields its hook instead, and so does cuGetProcAddress(_v2), whatever name, version
// or flags were asked (the substitution is by the real function returned, so a
// version whose ABI differs is never replaced).
#include <dlfcn.h>

#include <cstring>
#include <type_traits>

#include "limiter/limiter_exports.h"
#include "limiter/limiter_runtime.h"

using namespace tessera_limiter;  // NOLINT

namespace {

struct NamedHook {
  const char* name;
  void* hook;
};

template <typename Fn>
void* Address(Fn* fn) {
  return reinterpret_cast<void*>(fn);
}

// Every hook has the driver's signature (cuda_abi.h, itself checked against cuda.h).
#define TESSERA_SAME_ABI(hook, fn) \
  static_assert(std::is_same_v<decltype(hook), Fn_##fn>, #hook " has the wrong signature")
TESSERA_SAME_ABI(cuInit, cuInit);
TESSERA_SAME_ABI(cuMemAlloc_v2, cuMemAlloc_v2);
TESSERA_SAME_ABI(cuMemAllocPitch_v2, cuMemAllocPitch_v2);
TESSERA_SAME_ABI(cuMemAllocManaged, cuMemAllocManaged);
TESSERA_SAME_ABI(cuMemAllocAsync, cuMemAllocAsync);
TESSERA_SAME_ABI(cuMemAllocAsync_ptsz, cuMemAllocAsync);
TESSERA_SAME_ABI(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync);
TESSERA_SAME_ABI(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync);
TESSERA_SAME_ABI(cuMemCreate, cuMemCreate);
TESSERA_SAME_ABI(cuMemFree_v2, cuMemFree_v2);
TESSERA_SAME_ABI(cuMemFreeAsync, cuMemFreeAsync);
TESSERA_SAME_ABI(cuMemFreeAsync_ptsz, cuMemFreeAsync);
TESSERA_SAME_ABI(cuMemRelease, cuMemRelease);
TESSERA_SAME_ABI(cuMemGetInfo_v2, cuMemGetInfo_v2);
TESSERA_SAME_ABI(cuLaunchKernel, cuLaunchKernel);
TESSERA_SAME_ABI(cuLaunchKernel_ptsz, cuLaunchKernel);
TESSERA_SAME_ABI(cuLaunchKernelEx, cuLaunchKernelEx);
TESSERA_SAME_ABI(cuLaunchKernelEx_ptsz, cuLaunchKernelEx);
TESSERA_SAME_ABI(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel);
TESSERA_SAME_ABI(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel);
TESSERA_SAME_ABI(cuGraphLaunch, cuGraphLaunch);
TESSERA_SAME_ABI(cuGraphLaunch_ptsz, cuGraphLaunch);
TESSERA_SAME_ABI(cuGetProcAddress, cuGetProcAddress);
TESSERA_SAME_ABI(cuGetProcAddress_v2, cuGetProcAddress_v2);
#undef TESSERA_SAME_ABI

const NamedHook kHooks[] = {
    {"cuInit", Address(&cuInit)},
    {"cuMemAlloc_v2", Address(&cuMemAlloc_v2)},
    {"cuMemAllocPitch_v2", Address(&cuMemAllocPitch_v2)},
    {"cuMemAllocManaged", Address(&cuMemAllocManaged)},
    {"cuMemAllocAsync", Address(&cuMemAllocAsync)},
    {"cuMemAllocAsync_ptsz", Address(&cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", Address(&cuMemAllocFromPoolAsync)},
    {"cuMemAllocFromPoolAsync_ptsz", Address(&cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemCreate", Address(&cuMemCreate)},
    {"cuMemFree_v2", Address(&cuMemFree_v2)},
    {"cuMemFreeAsync", Address(&cuMemFreeAsync)},
    {"cuMemFreeAsync_ptsz", Address(&cuMemFreeAsync_ptsz)},
    {"cuMemRelease", Address(&cuMemRelease)},
    {"cuMemGetInfo_v2", Address(&cuMemGetInfo_v2)},
    {"cuLaunchKernel", Address(&cuLaunchKernel)},
    {"cuLaunchKernel_ptsz", Address(&cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", Address(&cuLaunchKernelEx)},
    {"cuLaunchKernelEx_ptsz", Address(&cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", Address(&cuLaunchCooperativeKernel)},
    {"cuLaunchCooperativeKernel_ptsz", Address(&cuLaunchCooperativeKernel_ptsz)},
    {"cuGraphLaunch", Address(&cuGraphLaunch)},
    {"cuGraphLaunch_ptsz", Address(&cuGraphLaunch_ptsz)},
    {"cuGetProcAddress", Address(&cuGetProcAddress)},
    {"cuGetProcAddress_v2", Address(&cuGetProcAddress_v2)},
};
constexpr size_t kHookCount = sizeof(kHooks) / sizeof(kHooks[0]);

// Real driver function -> hook; written once before the runtime is published.
struct RealToHook {
  void* real;
  void* hook;
};
RealToHook g_table[kHookCount];
size_t g_table_size = 0;

void* HookByName(const char* name) {
  for (const NamedHook& entry : kHooks) {
    if (std::strcmp(entry.name, name) == 0) return entry.hook;
  }
  return nullptr;
}

// Driver entry points are "cu" and a capital (cuInit, cuMemAlloc_v2); this keeps
// curl_*, cudnn* and the like off the slow path.
bool LooksLikeDriverName(const char* name) {
  return name != nullptr && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

// The hook to hand out for a lookup that found `real_fn` under `name`.
void* Substitute(const char* name, void* real_fn) {
  if (real_fn == nullptr) return real_fn;
  Runtime* rt = GetRuntime();
  if (rt == nullptr) return real_fn;  // the driver's own start-up, inside ours
  if (!rt->usable) {
    // Fail safe: a caller that cannot be limited gets hooks that refuse.
    void* hook = HookByName(name);
    return hook != nullptr ? hook : real_fn;
  }
  void* hook = HookFor(*rt, real_fn);
  return hook != nullptr ? hook : real_fn;
}

void* DriverDlsym(void* handle, const char* name) noexcept {
  return Substitute(name, RealDlsym()(handle, name));
}

}  // namespace

namespace tessera_limiter {

void RegisterHooks(Runtime& runtime) {
  // Without a cap or a share the hooks would only forward: hand out the real driver.
  if (runtime.ledger == nullptr && runtime.pacer == nullptr) return;
  for (const NamedHook& entry : kHooks) {
    void* real = RealDlsym()(runtime.real.handle, entry.name);
    if (real == nullptr || HookFor(runtime, real) != nullptr) continue;
    g_table[g_table_size++] = {real, entry.hook};
  }
}

void* HookFor(const Runtime& runtime, void* real_fn) {
  (void)runtime;
  for (size_t i = 0; i < g_table_size; ++i) {
    if (g_table[i].real == real_fn) return g_table[i].hook;
  }
  return nullptr;
}

}  // namespace tessera_limiter

// RTLD_NEXT resolves relative to the object that called dlsym, found from the return
// address: that path must be a tail call so that the caller stays the caller.
extern "C" __attribute__((visibility("default"),
                          optimize("O2", "omit-frame-pointer", "optimize-sibling-calls"))) void*
dlsym(void* __restrict handle, const char* __restrict name) noexcept {
  if (handle == RTLD_NEXT || !LooksLikeDriverName(name)) return RealDlsym()(handle, name);
  return DriverDlsym(handle, name);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  Runtime* rt = GetRuntime();
  if (rt == nullptr || !rt->usable) return CUDA_ERROR_NOT_INITIALIZED;
  if (rt->real.cuGetProcAddress_v2 == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult result = rt->real.cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    if (void* hook = HookFor(*rt, *pfn)) *pfn = hook;
  }
  return result;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  Runtime* rt = GetRuntime();
  if (rt == nullptr || !rt->usable) return CUDA_ERROR_NOT_INITIALIZED;
  if (rt->real.cuGetProcAddress == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult result = rt->real.cuGetProcAddress(symbol, pfn, cuda_version, flags);
  if (result == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    if (void* hook = HookFor(*rt, *pfn)) *pfn = hook;
  }
  return result;
}
