// The slice of the CUDA driver API that the limiter, its fake libcuda and its test
// client use, declared here so that none of them needs cuda.h to build. Types live in
// namespace tessera_cuda so that a file may include this header beside cuda.h; the
// test cuda_abi_check_test.cc (built when cuda.h is found) asserts that every
// signature, enum value and struct offset below matches the toolkit's.
//
// Only the 64-bit driver ABI is described (CUdeviceptr is 64 bits, the *_v2 entry
// points); enums are plain ints, which is how they are passed.
#ifndef TESSERA_LIMITER_CUDA_ABI_H_
#define TESSERA_LIMITER_CUDA_ABI_H_

#include <cstddef>
#include <cstdint>

namespace tessera_cuda {

using CUresult = int;
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

using CUdeviceptr = unsigned long long;
using CUdevice = int;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = std::uint64_t;

struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUevent_st;
struct CUstream_st;
struct CUgraphExec_st;
struct CUmemPoolHandle_st;
struct CUmemAllocationProp_st;  // contents never read by the limiter
struct CUlaunchAttribute_st;    // contents never read by the limiter
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUevent = CUevent_st*;
using CUstream = CUstream_st*;
using CUgraphExec = CUgraphExec_st*;
using CUmemoryPool = CUmemPoolHandle_st*;
using CUmemAllocationProp = CUmemAllocationProp_st;
using CUlaunchAttribute = CUlaunchAttribute_st;

struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

using CUstreamCaptureStatus = int;
inline constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;
using CUstreamCaptureMode = int;
inline constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
using CUdriverProcAddressQueryResult = int;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1;

// Event flags: the default (0) keeps timing, which pacing needs.
inline constexpr unsigned int CU_EVENT_DEFAULT = 0;
inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 1;

// Function types of the entry points, named after the exported symbol.
using Fn_cuInit = CUresult(unsigned int);
using Fn_cuDriverGetVersion = CUresult(int*);
using Fn_cuDeviceGet = CUresult(CUdevice*, int);
using Fn_cuDevicePrimaryCtxRetain = CUresult(CUcontext*, CUdevice);
using Fn_cuCtxSetCurrent = CUresult(CUcontext);
using Fn_cuCtxGetCurrent = CUresult(CUcontext*);
using Fn_cuCtxSynchronize = CUresult();
using Fn_cuModuleLoadData = CUresult(CUmodule*, const void*);
using Fn_cuModuleGetFunction = CUresult(CUfunction*, CUmodule, const char*);
using Fn_cuMemAlloc_v2 = CUresult(CUdeviceptr*, size_t);
using Fn_cuMemAllocPitch_v2 = CUresult(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using Fn_cuMemAllocManaged = CUresult(CUdeviceptr*, size_t, unsigned int);
using Fn_cuMemAllocAsync = CUresult(CUdeviceptr*, size_t, CUstream);
using Fn_cuMemAllocFromPoolAsync = CUresult(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
using Fn_cuMemCreate = CUresult(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                unsigned long long);
using Fn_cuMemFree_v2 = CUresult(CUdeviceptr);
using Fn_cuMemFreeAsync = CUresult(CUdeviceptr, CUstream);
using Fn_cuMemRelease = CUresult(CUmemGenericAllocationHandle);
using Fn_cuMemGetInfo_v2 = CUresult(size_t*, size_t*);
using Fn_cuLaunchKernel = CUresult(CUfunction, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, unsigned int, unsigned int, CUstream,
                                   void**, void**);
using Fn_cuLaunchKernelEx = CUresult(const CUlaunchConfig*, CUfunction, void**, void**);
using Fn_cuLaunchCooperativeKernel = CUresult(CUfunction, unsigned int, unsigned int, unsigned int,
                                              unsigned int, unsigned int, unsigned int,
                                              unsigned int, CUstream, void**);
using Fn_cuGraphLaunch = CUresult(CUgraphExec, CUstream);
using Fn_cuEventCreate = CUresult(CUevent*, unsigned int);
using Fn_cuEventRecord = CUresult(CUevent, CUstream);
using Fn_cuEventQuery = CUresult(CUevent);
using Fn_cuEventSynchronize = CUresult(CUevent);
using Fn_cuEventElapsedTime = CUresult(float*, CUevent, CUevent);
using Fn_cuEventDestroy_v2 = CUresult(CUevent);
using Fn_cuStreamSynchronize = CUresult(CUstream);
using Fn_cuStreamIsCapturing = CUresult(CUstream, CUstreamCaptureStatus*);
using Fn_cuThreadExchangeStreamCaptureMode = CUresult(CUstreamCaptureMode*);
// cuGetProcAddress as CUDA 11.3..11.8 declared it (still exported by every driver).
using Fn_cuGetProcAddress = CUresult(const char*, void**, int, cuuint64_t);
// cuGetProcAddress_v2 (CUDA 12 and later; cuda.h maps cuGetProcAddress to it).
using Fn_cuGetProcAddress_v2 = CUresult(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);

}  // namespace tessera_cuda

#endif  // TESSERA_LIMITER_CUDA_ABI_H_
