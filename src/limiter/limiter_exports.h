// The C entry points the limiter exports in place of the driver's (and dlsym, dlvsym
// and dlmopen, declared by <dlfcn.h> and defined in limiter_symbols.cc). Only these leave the library (limiter_exports.map); the
// types are the ABI of cuda_abi.h.
#ifndef TESSERA_LIMITER_LIMITER_EXPORTS_H_
#define TESSERA_LIMITER_LIMITER_EXPORTS_H_

#include <cstddef>

#include "limiter/cuda_abi.h"

#define TESSERA_LIMITER_EXPORT extern "C" __attribute__((visibility("default")))

namespace tc = tessera_cuda;

TESSERA_LIMITER_EXPORT tc::CUresult cuInit(unsigned int flags);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAlloc_v2(tc::CUdeviceptr* dptr, size_t bytes);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocPitch_v2(tc::CUdeviceptr* dptr, size_t* pitch,
                                                       size_t width, size_t height,
                                                       unsigned int element_size);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocManaged(tc::CUdeviceptr* dptr, size_t bytes,
                                                      unsigned int flags);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocAsync(tc::CUdeviceptr* dptr, size_t bytes,
                                                    tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocAsync_ptsz(tc::CUdeviceptr* dptr, size_t bytes,
                                                         tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocFromPoolAsync(tc::CUdeviceptr* dptr, size_t bytes,
                                                            tc::CUmemoryPool pool,
                                                            tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemAllocFromPoolAsync_ptsz(tc::CUdeviceptr* dptr,
                                                                 size_t bytes,
                                                                 tc::CUmemoryPool pool,
                                                                 tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemCreate(tc::CUmemGenericAllocationHandle* handle,
                                                size_t size, const tc::CUmemAllocationProp* prop,
                                                unsigned long long flags);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemFree_v2(tc::CUdeviceptr dptr);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemFreeAsync(tc::CUdeviceptr dptr, tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemFreeAsync_ptsz(tc::CUdeviceptr dptr, tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemRelease(tc::CUmemGenericAllocationHandle handle);
TESSERA_LIMITER_EXPORT tc::CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);

#define TESSERA_LIMITER_LAUNCH_PARAMS                                                              \
  tc::CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,                 \
      unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, \
      tc::CUstream stream, void** params
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchKernel(TESSERA_LIMITER_LAUNCH_PARAMS, void** extra);
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchKernel_ptsz(TESSERA_LIMITER_LAUNCH_PARAMS,
                                                        void** extra);
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchCooperativeKernel(TESSERA_LIMITER_LAUNCH_PARAMS);
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchCooperativeKernel_ptsz(TESSERA_LIMITER_LAUNCH_PARAMS);
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchKernelEx(const tc::CUlaunchConfig* config,
                                                     tc::CUfunction f, void** params, void** extra);
TESSERA_LIMITER_EXPORT tc::CUresult cuLaunchKernelEx_ptsz(const tc::CUlaunchConfig* config,
                                                          tc::CUfunction f, void** params,
                                                          void** extra);
TESSERA_LIMITER_EXPORT tc::CUresult cuGraphLaunch(tc::CUgraphExec graph, tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuGraphLaunch_ptsz(tc::CUgraphExec graph, tc::CUstream stream);
TESSERA_LIMITER_EXPORT tc::CUresult cuGetProcAddress(const char* symbol, void** pfn,
                                                     int cuda_version, tc::cuuint64_t flags);
TESSERA_LIMITER_EXPORT tc::CUresult cuGetProcAddress_v2(const char* symbol, void** pfn,
                                                        int cuda_version, tc::cuuint64_t flags,
                                                        tc::CUdriverProcAddressQueryResult* status);

#endif  // TESSERA_LIMITER_LIMITER_EXPORTS_H_
