// Launch hooks: each launch (kernels, cooperative kernels, graphs) is paced by the
// Pacer when a compute share is set, and forwarded untouched otherwise. The _ptsz
// variants are the per-thread-default-stream entry points; they forward to the
// driver's matching variant and record their timing events with it.
#include "limiter/limiter_exports.h"
#include "limiter/limiter_runtime.h"
#include "limiter/pacer.h"

using namespace tessera_limiter;  // NOLINT

namespace {

// Forwards `call` (which invokes the real entry point) with pacing around it.
template <typename Call>
CUresult Launch(Runtime& rt, CUstream stream, bool per_thread, Call call) {
  if (rt.pacer == nullptr) return call();
  const Pacer::Measure measure = rt.pacer->BeforeLaunch(stream, per_thread);
  const CUresult result = call();
  rt.pacer->AfterLaunch(measure, stream, per_thread, result);
  return result;
}

Runtime* Usable() {
  Runtime* rt = GetRuntime();
  return rt != nullptr && rt->usable ? rt : nullptr;
}

CUresult LaunchKernel(int v, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                      CUstream stream, void** params, void** extra) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuLaunchKernel* real = rt->real.cuLaunchKernel[v];
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return Launch(*rt, stream, v == 1,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });
}

CUresult LaunchCooperative(int v, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                           unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                           CUstream stream, void** params) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuLaunchCooperativeKernel* real = rt->real.cuLaunchCooperativeKernel[v];
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return Launch(*rt, stream, v == 1,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params); });
}

CUresult LaunchEx(int v, const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuLaunchKernelEx* real = rt->real.cuLaunchKernelEx[v];
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUstream stream = config != nullptr ? config->hStream : nullptr;
  return Launch(*rt, stream, v == 1, [&] { return real(config, f, params, extra); });
}

CUresult GraphLaunch(int v, CUgraphExec graph, CUstream stream) {
  Runtime* rt = Usable();
  if (rt == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Fn_cuGraphLaunch* real = rt->real.cuGraphLaunch[v];
  if (real == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  // A graph's whole run (all its kernels and copies) is one measured span.
  return Launch(*rt, stream, v == 1, [&] { return real(graph, stream); });
}

}  // namespace

CUresult cuInit(unsigned int flags) {
  Runtime* rt = Usable();
  if (rt == nullptr || rt->real.cuInit == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return rt->real.cuInit(flags);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream stream, void** params, void** extra) {
  return LaunchKernel(0, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream stream, void** params, void** extra) {
  return LaunchKernel(1, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream stream, void** params) {
  return LaunchCooperative(0, f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream stream,
                                        void** params) {
  return LaunchCooperative(1, f, gx, gy, gz, bx, by, bz, shared, stream, params);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return LaunchEx(0, config, f, params, extra);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return LaunchEx(1, config, f, params, extra);
}
CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) { return GraphLaunch(0, graph, stream); }
CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) {
  return GraphLaunch(1, graph, stream);
}
