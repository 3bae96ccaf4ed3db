// TimeLimits: runtime limits as a controller module (modules/controller_module.h). It
// owns the deadlines of running attempts: a job's runtime limit (`runtime_limit`,
// sbatch's --time) and the signal it asks for ahead of it (`signal: {name, before}`,
// sbatch's --signal), both measured from the attempt's start.
//
// Hooks: OnAttemptRunning (Watch: an attempt started, or was found running after a
// restart; the controller's own check jobs time out by their own rules and are not
// watched) and BeforeCycle (what falls due now, acted on through the step). A limit
// asks the attempt machine to stop the attempt with the stop grace and fail it ("time
// limit"); a signal goes to the attempt's tasks as a stop whose grace runs to the limit
// and then the stop grace, so that a task that saves its work and exits ends on its own
// terms, and one that does not is killed where the limit alone would have killed it.
//
// Invariants: each watched attempt's signal is due at most once and not after its
// limit; the earliest deadline is found without a walk over the jobs (a heap). An entry
// of an attempt that ended early stays until its time and is returned then: only an
// attempt that still runs is acted on.
// Watch/TakeDue are pure: time comes in as arguments. Thread safety: none; the
// controller calls it with its core lock held.
#pragma once

#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "server/job_number.h"
#include "server/modules/controller_module.h"

namespace tessera {

class TimeLimits final : public ControllerModule {
 public:
  struct Attempt {
    JobNumber job;
    int32_t attempt = 0;
    Micros run_start = 0;
    Micros limit = 0;          // 0: none
    int signal = 0;            // 0: none
    Micros signal_before = 0;  // how long before the limit the signal goes
  };
  struct Due {
    enum class Kind : uint8_t { kSignal, kLimit };
    Kind kind = Kind::kLimit;
    JobNumber job;
    int32_t attempt = 0;
    int signal = 0;       // kSignal
    Micros limit_at = 0;  // when the limit falls (kSignal: its grace runs until then)
  };

  // An attempt started (or runs after a restart): its limit and signal are watched.
  // Nothing without a limit; a signal whose time has passed by `now` is due at once.
  void Watch(const Attempt& a);
  // What falls due at or before `now`, earliest first (a signal before the limit of the
  // same attempt); each is returned once.
  std::vector<Due> TakeDue(Micros now);
  // The earliest deadline watched; 0: none.
  Micros next() const { return heap_.empty() ? 0 : heap_.top().at; }
  size_t watched() const { return heap_.size(); }

  // The hooks.
  void OnAttemptRunning(const JobFacts& job) override;
  void BeforeCycle(ModuleStep& step) override;

 private:
  struct Entry {
    Micros at;
    uint64_t seq;  // the order of Watch, for ties
    Due due;
    bool operator>(const Entry& o) const {
      return std::pair(at, seq) > std::pair(o.at, o.seq);
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  uint64_t seq_ = 0;
};

}  // namespace tessera
