#include "base/wake_loop.h"

#include <chrono>
#include <utility>

namespace tessera {

bool WakeLoop::Start(std::function<void()> cycle, Micros interval) {
  MutexLock lock(mu_);
  if (thread_.joinable()) {
    return false;
  }
  stopping_ = false;
  thread_ = std::thread([this, cycle = std::move(cycle), interval] { Run(cycle, interval); });
  return true;
}

void WakeLoop::Wake() {
  {
    MutexLock lock(mu_);
    wake_ = true;
  }
  cv_.NotifyAll();
}

void WakeLoop::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void WakeLoop::Run(const std::function<void()>& cycle, Micros interval) {
  MutexLock lock(mu_);
  while (!stopping_) {
    cv_.WaitFor(mu_, std::chrono::microseconds(interval),
                [this]() REQUIRES(mu_) { return stopping_ || wake_; });
    if (stopping_) {
      break;
    }
    wake_ = false;
    lock.Unlock();  // the cycle runs without the loop's lock (see the header)
    cycle();
    lock.Lock();
  }
}

}  // namespace tessera
