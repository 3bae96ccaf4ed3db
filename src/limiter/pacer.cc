#include "limiter/pacer.h"

#include <time.h>

#include <cstdint>
#include <mutex>

namespace tessera_limiter {
namespace {

// Stream capture in another thread (CU_STREAM_CAPTURE_MODE_GLOBAL) forbids "unsafe"
// calls in this one; the limiter's own event calls are made in relaxed mode, as the
// driver documents for libraries, and the caller's mode is restored afterwards.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const RealDriver& real)
      : exchange_(real.cuThreadExchangeStreamCaptureMode) {
    if (exchange_ != nullptr && exchange_(&mode_) != CUDA_SUCCESS) exchange_ = nullptr;
  }
  ~RelaxedCaptureMode() {
    if (exchange_ != nullptr) exchange_(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  Fn_cuThreadExchangeStreamCaptureMode* exchange_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

void SleepNs(std::int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace

Pacer::Pacer(const RealDriver& real, int percent)
    : real_(real), bucket_(percent, kBurstNs, MonotonicNs()) {}

Pacer::Measure Pacer::BeforeLaunch(CUstream stream, bool per_thread) {
  RelaxedCaptureMode relaxed(real_);
  std::int64_t delay_ns = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PollLocked(pending_.size() >= kMaxPending);
    ++launches_;
    delay_ns = bucket_.DelayNs(MonotonicNs());
  }
  if (delay_ns > 0) {
    SleepNs(delay_ns);
    std::lock_guard<std::mutex> lock(mu_);
    slept_ns_ += delay_ns;
  }
  // Work recorded into a capturing stream becomes part of a graph; it is measured
  // when the graph is launched instead.
  Fn_cuStreamIsCapturing* is_capturing = real_.cuStreamIsCapturing[per_thread ? 1 : 0];
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing != nullptr &&
      (is_capturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE)) {
    return {};
  }
  Fn_cuEventRecord* record = real_.cuEventRecord[per_thread ? 1 : 0];
  CUcontext context = nullptr;
  if (record == nullptr || real_.cuCtxGetCurrent == nullptr ||
      real_.cuCtxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr) {
    return {};
  }
  Measure measure{context, nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!TakeEventsLocked(context, &measure.start, &measure.stop)) return {};
  }
  if (record(measure.start, stream) != CUDA_SUCCESS) {
    // The stream may belong to another context: not measured, events dropped.
    real_.cuEventDestroy_v2(measure.start);
    real_.cuEventDestroy_v2(measure.stop);
    return {};
  }
  return measure;
}

void Pacer::AfterLaunch(const Measure& measure, CUstream stream, bool per_thread,
                        CUresult launch_result) {
  if (measure.start == nullptr) return;
  RelaxedCaptureMode relaxed(real_);
  if (launch_result == CUDA_SUCCESS &&
      real_.cuEventRecord[per_thread ? 1 : 0](measure.stop, stream) == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({measure.context, measure.start, measure.stop});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  RecycleLocked(measure.context, measure.start, measure.stop);
}

void Pacer::PollLocked(bool wait_oldest) {
  if (wait_oldest && !pending_.empty()) {
    real_.cuEventSynchronize(pending_.front().stop);
  }
  // In launch order, up to the first pair still running: one query per launch in the
  // steady state. Later pairs on faster streams wait their turn (they are charged late,
  // not forgotten).
  while (!pending_.empty()) {
    const Pending oldest = pending_.front();
    const CUresult state = real_.cuEventQuery(oldest.stop);
    if (state == CUDA_ERROR_NOT_READY) break;
    pending_.pop_front();
    if (state == CUDA_SUCCESS) {
      ChargeLocked(oldest);
      RecycleLocked(oldest.context, oldest.start, oldest.stop);
    } else {
      real_.cuEventDestroy_v2(oldest.start);
      real_.cuEventDestroy_v2(oldest.stop);
    }
  }
}

void Pacer::ChargeLocked(const Pending& done) {
  float ms = 0;
  if (real_.cuEventElapsedTime(&ms, done.start, done.stop) != CUDA_SUCCESS || ms <= 0) return;
  const auto ns = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  bucket_.Charge(ns);
  charged_ns_ += ns;
}

bool Pacer::TakeEventsLocked(CUcontext context, CUevent* start, CUevent* stop) {
  std::vector<CUevent>& pool = free_events_[context];
  while (pool.size() < 2) {
    CUevent event = nullptr;
    if (real_.cuEventCreate(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
    pool.push_back(event);
  }
  *start = pool.back();
  pool.pop_back();
  *stop = pool.back();
  pool.pop_back();
  return true;
}

void Pacer::RecycleLocked(CUcontext context, CUevent start, CUevent stop) {
  std::vector<CUevent>& pool = free_events_[context];
  pool.push_back(stop);
  pool.push_back(start);
}

std::int64_t Pacer::charged_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return charged_ns_;
}
std::int64_t Pacer::slept_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slept_ns_;
}
std::int64_t Pacer::launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launches_;
}

}  // namespace tessera_limiter
