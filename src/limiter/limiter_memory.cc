// Memory hooks: every device allocation is reserved against the cap before the driver
// sees it, and every free gives back what that pointer or handle was charged.
#include <cstdint>

#include "limiter/limiter_exports.h"
#include "limiter/limiter_runtime.h"

using namespace tessera_limiter;  // NOLINT

namespace {

Runtime* Usable() {
  Runtime* rt = GetRuntime();
  return rt != nullptr && rt->usable ? rt : nullptr;
}

// Reserve, call the driver, then commit under the key it returned (or give the
// reservation back when it failed).
template <typename Call>
CUresult Allocate(Runtime& rt, const char* api, std::uint64_t bytes, MemoryKey kind,
                  const unsigned long long* key, Call call) {
  if (rt.ledger == nullptr) return call();
  if (!rt.ledger->Reserve(bytes)) {
    LogLine("%s of %llu bytes refused: %llu of %llu held", api,
            static_cast<unsigned long long>(bytes),
            static_cast<unsigned long long>(rt.ledger->held()),
            static_cast<unsigned long long>(rt.ledger->cap()));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult result = call();
  if (result != CUDA_SUCCESS) {
    rt.ledger->Unreserve(bytes);
    return result;
  }
  rt.ledger->Commit(kind, *key, bytes);
  return result;
}

template <typename Call>
CUresult Free(Runtime& rt, MemoryKey kind, std::uint64_t key, Call call) {
  const CUresult result = call();
  if (result == CUDA_SUCCESS && rt.ledger != nullptr) rt.ledger->Release(kind, key);
  return result;
}

CUresult AllocAsync(int variant, CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemAllocAsync* real = rt->real.cuMemAllocAsync[variant];
  if (real == nullptr || dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(*rt, "cuMemAllocAsync", bytes, MemoryKey::kPointer, dptr,
                  [&] { return real(dptr, bytes, stream); });
}

CUresult AllocFromPoolAsync(int variant, CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                            CUstream stream) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemAllocFromPoolAsync* real = rt->real.cuMemAllocFromPoolAsync[variant];
  if (real == nullptr || dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(*rt, "cuMemAllocFromPoolAsync", bytes, MemoryKey::kPointer, dptr,
                  [&] { return real(dptr, bytes, pool, stream); });
}

CUresult FreeAsync(int variant, CUdeviceptr dptr, CUstream stream) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemFreeAsync* real = rt->real.cuMemFreeAsync[variant];
  if (real == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Quota comes back when the free is enqueued, not when the stream reaches it.
  return Free(*rt, MemoryKey::kPointer, dptr, [&] { return real(dptr, stream); });
}

}  // namespace

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemAlloc_v2* real = rt->real.cuMemAlloc_v2;
  if (real == nullptr || dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(*rt, "cuMemAlloc", bytes, MemoryKey::kPointer, dptr,
                  [&] { return real(dptr, bytes); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemAllocPitch_v2* real = rt->real.cuMemAllocPitch_v2;
  if (real == nullptr || dptr == nullptr || pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (rt->ledger == nullptr) return real(dptr, pitch, width, height, element_size);
  // The driver chooses the pitch; reserve rows rounded up to 512 bytes (the largest
  // alignment it uses), then keep what the allocation really took.
  const std::uint64_t estimate = ((std::uint64_t{width} + 511) / 512 * 512) * height;
  unsigned long long key = 0;
  const CUresult result =
      Allocate(*rt, "cuMemAllocPitch", estimate, MemoryKey::kPointer, &key, [&] {
        const CUresult r = real(dptr, pitch, width, height, element_size);
        if (r == CUDA_SUCCESS) key = *dptr;
        return r;
      });
  if (result != CUDA_SUCCESS) return result;
  const std::uint64_t actual = std::uint64_t{*pitch} * height;
  if (actual != estimate) {
    rt->ledger->Release(MemoryKey::kPointer, key);
    if (!rt->ledger->Reserve(actual)) {
      rt->real.cuMemFree_v2(*dptr);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rt->ledger->Commit(MemoryKey::kPointer, key, actual);
  }
  return result;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemAllocManaged* real = rt->real.cuMemAllocManaged;
  if (real == nullptr || dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Counted in full: managed memory may all end up resident on the device.
  return Allocate(*rt, "cuMemAllocManaged", bytes, MemoryKey::kPointer, dptr,
                  [&] { return real(dptr, bytes, flags); });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsync(0, dptr, bytes, stream);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsync(1, dptr, bytes, stream);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  return AllocFromPoolAsync(0, dptr, bytes, pool, stream);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  return AllocFromPoolAsync(1, dptr, bytes, pool, stream);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemCreate* real = rt->real.cuMemCreate;
  if (real == nullptr || handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(*rt, "cuMemCreate", size, MemoryKey::kHandle, handle,
                  [&] { return real(handle, size, prop, flags); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemFree_v2* real = rt->real.cuMemFree_v2;
  if (real == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Free(*rt, MemoryKey::kPointer, dptr, [&] { return real(dptr); });
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) { return FreeAsync(0, dptr, stream); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return FreeAsync(1, dptr, stream);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemRelease* real = rt->real.cuMemRelease;
  if (real == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Free(*rt, MemoryKey::kHandle, handle, [&] { return real(handle); });
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuMemGetInfo_v2* real = rt->real.cuMemGetInfo_v2;
  if (real == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (rt->ledger == nullptr || free_bytes == nullptr || total_bytes == nullptr) {
    return real(free_bytes, total_bytes);
  }
  size_t real_free = 0;
  size_t real_total = 0;
  const CUresult result = real(&real_free, &real_total);
  if (result != CUDA_SUCCESS) return result;
  // The cap is the card as this process sees it (never more than the card), and what
  // is free never more than what the card really has free.
  const std::uint64_t total = rt->ledger->cap() < real_total ? rt->ledger->cap() : real_total;
  const std::uint64_t held = rt->ledger->held();
  const std::uint64_t left = held < total ? total - held : 0;
  *total_bytes = static_cast<size_t>(total);
  *free_bytes = static_cast<size_t>(left < real_free ? left : real_free);
  return result;
}
