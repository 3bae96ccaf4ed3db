// The default policies' fingerprint: what a committed policy matrix was measured with.
//
// Two parts. The options: every preset's resolved SchedulerPolicy (plugins/
// job_policies.h), the simulator's defaults (tick, grace, predictor) and the default
// preemption and placement model `tessera sim jobs` gives every policy, as canonical
// text. The behaviour: every preset run on a small fixed probe (three tenants with
// quotas of 16, 8 and 8 GPUs submitting 3:2:1, on a mix of two GPU models, under the
// default model and again with no checkpoint wait), each job's start, finish,
// preemptions and starts hashed. A change of a rule
// in the scheduler's code changes no option but does change the probe's schedule; a
// refactor that keeps every schedule changes neither. The fingerprint hashes both.
// Thread safety: functions, no shared state.
#pragma once

#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "plugins/job_policies.h"

namespace tessera {

// The preemption and placement model every policy runs under (sim jobs' defaults).
struct DefaultSimModel {
  std::string placement;
  Micros restart_overhead = 0;
  Micros checkpoint_wait = 0;
  Micros checkpoint_interval = 0;
  bool checkpoint_on_signal = false;
};

struct PolicyFingerprint {
  std::string fingerprint;           // 16 hex digits over `options` and `probe`
  std::vector<std::string> options;  // one canonical line per preset, then the model's
  std::string options_hash;          // 16 hex digits over `options`
  std::string probe_hash;            // 16 hex digits over the probe's schedules
};

// One line: every field of the policy that changes a schedule, in declaration order.
std::string PolicyOptionsLine(const SchedulerPolicy& policy);
StatusOr<PolicyFingerprint> DefaultPolicyFingerprint(const DefaultSimModel& model,
                                                     const GpuCatalog& catalog);

}  // namespace tessera
