// How callers reach the hooks. Programs linked with -lcuda bind to the limiter's
// exports directly (it is preloaded). The CUDA runtime instead dlopens libcuda.so.1,
// looks up cuGetProcAddress with dlsym on that handle (which would bypass a preloaded
// library) and obtains every other entry point through it. So the limiter exports
// dlsym and dlvsym too: a lookup that yields one of the real driver functions it
// intercepts yields its hook instead, whatever the version string asked of dlvsym,
// and so does cuGetProcAddress(_v2), whatever name, version or flags were asked (the
// substitution is by the real function returned, so a version whose ABI differs is
// never replaced). A lookup that yields the C library's dlsym, dlvsym or dlmopen
// (dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34") skips an unversioned export; a handle
// of libc finds libc's) yields the limiter's. RTLD_NEXT lookups are passed on as they
// are: the C library finds the caller from the return address.
//
// dlmopen of the driver (a file named libcuda.so*, or TESSERA_CUDA_REAL_LIBRARY's
// name) into a namespace other than the base one would load a second driver that none
// of the above sees: while limits are set such a call is routed to the base namespace
// (the caller gets the one driver everybody shares, hooked as for dlopen). Other
// libraries are loaded where asked; one that itself loads the driver in a new
// namespace is not followed (docs/gpu-sharing.md).
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

// The dl functions the limiter replaces. Other lookups stay tail calls: the C library
// resolves RTLD_DEFAULT in the scope of the caller it finds from the return address.
bool LooksLikeDlName(const char* name) {
  return name != nullptr && name[0] == 'd' && name[1] == 'l' &&
         (std::strcmp(name, "dlsym") == 0 || std::strcmp(name, "dlvsym") == 0 ||
          std::strcmp(name, "dlmopen") == 0);
}

bool IsHookedName(const char* name) { return LooksLikeDriverName(name) || LooksLikeDlName(name); }

void* OwnDlsym();
void* OwnDlvsym();
void* OwnDlmopen();

// The hook to hand out for a lookup that found `real_fn` under `name`.
void* HookForLookup(const char* name, void* real_fn) {
  if (!LooksLikeDlName(name) || real_fn == nullptr) return Substitute(name, real_fn);
  if (real_fn == reinterpret_cast<void*>(RealDlsym())) return OwnDlsym();
  if (real_fn == reinterpret_cast<void*>(RealDlvsym())) return OwnDlvsym();
  if (real_fn == reinterpret_cast<void*>(RealDlmopen())) return OwnDlmopen();
  return real_fn;
}

void* HookedDlsym(void* handle, const char* name) noexcept {
  return HookForLookup(name, RealDlsym()(handle, name));
}

void* HookedDlvsym(void* handle, const char* name, const char* version) noexcept {
  return HookForLookup(name, RealDlvsym()(handle, name, version));
}

// Whether dlmopen must load `file` in the base namespace: the driver, while limits
// are set (or malformed: the base driver then refuses every call).
bool RoutesToBase(const char* file) {
  if (file == nullptr) return false;
  const LimiterConfig& config = LoadedConfig();
  if (config.ok() && !config.caps_memory() && !config.paces()) return false;
  const char* base = std::strrchr(file, '/');
  base = base == nullptr ? file : base + 1;
  if (std::strncmp(base, "libcuda.so", 10) == 0) return true;
  const char* real = std::strrchr(config.real_library.c_str(), '/');
  real = real == nullptr ? config.real_library.c_str() : real + 1;
  return std::strcmp(base, real) == 0;
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
  if (handle == RTLD_NEXT || !IsHookedName(name)) return RealDlsym()(handle, name);
  return HookedDlsym(handle, name);
}

extern "C" __attribute__((visibility("default"),
                          optimize("O2", "omit-frame-pointer", "optimize-sibling-calls"))) void*
dlvsym(void* __restrict handle, const char* __restrict name,
       const char* __restrict version) noexcept {
  if (handle == RTLD_NEXT || !IsHookedName(name)) return RealDlvsym()(handle, name, version);
  return HookedDlvsym(handle, name, version);
}

// The C library searches the caller's paths (RUNPATH, $ORIGIN) from the return
// address: this too must end in a tail call.
extern "C" __attribute__((visibility("default"),
                          optimize("O2", "omit-frame-pointer", "optimize-sibling-calls"))) void*
dlmopen(Lmid_t lmid, const char* file, int mode) noexcept {
  if (lmid != LM_ID_BASE && RoutesToBase(file)) {
    LogLine("dlmopen of %s into namespace %ld routed to the base namespace", file,
            static_cast<long>(lmid));
    lmid = LM_ID_BASE;
  }
  return RealDlmopen()(lmid, file, mode);
}

// The limiter's own exports, not whatever the global lookup of their names finds.
extern "C" void* tessera_limiter_dlsym(void*, const char*) noexcept
    __attribute__((alias("dlsym"), visibility("hidden"), nonnull(2)));
extern "C" void* tessera_limiter_dlvsym(void*, const char*, const char*) noexcept
    __attribute__((alias("dlvsym"), visibility("hidden"), nonnull(2, 3)));
extern "C" void* tessera_limiter_dlmopen(Lmid_t, const char*, int) noexcept
    __attribute__((alias("dlmopen"), visibility("hidden")));

namespace {

void* OwnDlsym() { return reinterpret_cast<void*>(&tessera_limiter_dlsym); }
void* OwnDlvsym() { return reinterpret_cast<void*>(&tessera_limiter_dlvsym); }
void* OwnDlmopen() { return reinterpret_cast<void*>(&tessera_limiter_dlmopen); }

}  // namespace

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
