// cuda_abi.h against the toolkit's cuda.h (built only where cuda.h is found): every
// entry point the limiter, the fake driver or the client declares has the same
// signature as the toolkit's once each CUDA type is mapped to the project's, and the
// constants and CUlaunchConfig's layout are the same. Everything is checked at
// compile time; the test body only reports that it compiled.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "limiter/cuda_abi.h"

namespace {

namespace tc = tessera_cuda;

// Canon<T>: the project's type for a cuda.h type (identity for plain types).
template <typename T, typename = void>
struct Canon {
  using type = T;
};
template <typename T>
using CanonT = typename Canon<T>::type;
template <typename T>
struct Canon<T, std::enable_if_t<std::is_enum_v<T>>> {
  using type = int;
};
template <typename T>
struct Canon<T*, void> {
  using type = CanonT<T>*;
};
template <typename T>
struct Canon<const T, void> {
  using type = const CanonT<T>;
};
template <typename R, typename... A>
struct Canon<R(A...), void> {
  using type = CanonT<R>(CanonT<A>...);
};
#define TESSERA_CANON(cuda_type, ours) \
  template <>                          \
  struct Canon<cuda_type, void> {      \
    using type = ours;                 \
  }
TESSERA_CANON(CUctx_st, tc::CUctx_st);
TESSERA_CANON(CUmod_st, tc::CUmod_st);
TESSERA_CANON(CUfunc_st, tc::CUfunc_st);
TESSERA_CANON(CUevent_st, tc::CUevent_st);
TESSERA_CANON(CUstream_st, tc::CUstream_st);
TESSERA_CANON(CUgraphExec_st, tc::CUgraphExec_st);
TESSERA_CANON(CUmemPoolHandle_st, tc::CUmemPoolHandle_st);
TESSERA_CANON(CUmemAllocationProp, tc::CUmemAllocationProp);
TESSERA_CANON(CUlaunchConfig, tc::CUlaunchConfig);
#undef TESSERA_CANON

// Functions cuda.h renames with a macro (cuMemAlloc -> cuMemAlloc_v2) are named here by
// their exported symbol, which is what the macro expands to.
#define TESSERA_SAME(fn) \
  static_assert(std::is_same_v<CanonT<decltype(::fn)>, tc::Fn_##fn>, #fn " differs from cuda.h")
TESSERA_SAME(cuInit);
TESSERA_SAME(cuDriverGetVersion);
TESSERA_SAME(cuDeviceGet);
TESSERA_SAME(cuDevicePrimaryCtxRetain);
TESSERA_SAME(cuCtxSetCurrent);
TESSERA_SAME(cuCtxGetCurrent);
TESSERA_SAME(cuCtxSynchronize);
TESSERA_SAME(cuModuleLoadData);
TESSERA_SAME(cuModuleGetFunction);
TESSERA_SAME(cuMemAlloc_v2);
TESSERA_SAME(cuMemAllocPitch_v2);
TESSERA_SAME(cuMemAllocManaged);
TESSERA_SAME(cuMemAllocAsync);
TESSERA_SAME(cuMemAllocFromPoolAsync);
TESSERA_SAME(cuMemCreate);
TESSERA_SAME(cuMemFree_v2);
TESSERA_SAME(cuMemFreeAsync);
TESSERA_SAME(cuMemRelease);
TESSERA_SAME(cuMemGetInfo_v2);
TESSERA_SAME(cuLaunchKernel);
TESSERA_SAME(cuLaunchKernelEx);
TESSERA_SAME(cuLaunchCooperativeKernel);
TESSERA_SAME(cuGraphLaunch);
TESSERA_SAME(cuEventCreate);
TESSERA_SAME(cuEventRecord);
TESSERA_SAME(cuEventQuery);
TESSERA_SAME(cuEventSynchronize);
TESSERA_SAME(cuEventDestroy_v2);
TESSERA_SAME(cuStreamSynchronize);
TESSERA_SAME(cuStreamIsCapturing);
TESSERA_SAME(cuThreadExchangeStreamCaptureMode);
TESSERA_SAME(cuGetProcAddress_v2);
#undef TESSERA_SAME
// cuEventElapsedTime: cuda.h 12.8+ maps the name to _v2, same signature as the v1 the
// limiter resolves (present in every driver).
static_assert(std::is_same_v<CanonT<decltype(::cuEventElapsedTime)>, tc::Fn_cuEventElapsedTime>);

static_assert(sizeof(::CUresult) == sizeof(tc::CUresult));
static_assert(::CUDA_SUCCESS == tc::CUDA_SUCCESS);
static_assert(::CUDA_ERROR_INVALID_VALUE == tc::CUDA_ERROR_INVALID_VALUE);
static_assert(::CUDA_ERROR_OUT_OF_MEMORY == tc::CUDA_ERROR_OUT_OF_MEMORY);
static_assert(::CUDA_ERROR_NOT_INITIALIZED == tc::CUDA_ERROR_NOT_INITIALIZED);
static_assert(::CUDA_ERROR_INVALID_HANDLE == tc::CUDA_ERROR_INVALID_HANDLE);
static_assert(::CUDA_ERROR_NOT_FOUND == tc::CUDA_ERROR_NOT_FOUND);
static_assert(::CUDA_ERROR_NOT_READY == tc::CUDA_ERROR_NOT_READY);
static_assert(::CUDA_ERROR_NOT_SUPPORTED == tc::CUDA_ERROR_NOT_SUPPORTED);
static_assert(std::is_same_v<::CUdeviceptr, tc::CUdeviceptr>);
static_assert(std::is_same_v<::CUdevice, tc::CUdevice>);
static_assert(std::is_same_v<::CUmemGenericAllocationHandle, tc::CUmemGenericAllocationHandle>);
static_assert(std::is_same_v<::cuuint64_t, tc::cuuint64_t>);
static_assert(sizeof(::CUstreamCaptureStatus) == sizeof(int));
static_assert(::CU_STREAM_CAPTURE_STATUS_NONE == tc::CU_STREAM_CAPTURE_STATUS_NONE);
static_assert(::CU_STREAM_CAPTURE_MODE_RELAXED == tc::CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(::CU_GET_PROC_ADDRESS_SUCCESS == tc::CU_GET_PROC_ADDRESS_SUCCESS);
static_assert(::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND == tc::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ==
              tc::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
static_assert(::CU_EVENT_DEFAULT == tc::CU_EVENT_DEFAULT);
static_assert(::CU_MEM_ATTACH_GLOBAL == tc::CU_MEM_ATTACH_GLOBAL);
static_assert(sizeof(::CUlaunchConfig) == sizeof(tc::CUlaunchConfig));
static_assert(offsetof(::CUlaunchConfig, hStream) == offsetof(tc::CUlaunchConfig, hStream));
static_assert(offsetof(::CUlaunchConfig, numAttrs) == offsetof(tc::CUlaunchConfig, numAttrs));

TEST(CudaAbiCheckTest, MatchesTheToolkitHeader) {
  int version = CUDA_VERSION;
  EXPECT_GE(version, 11030) << "cuGetProcAddress needs CUDA 11.3 or later";
}

}  // namespace
