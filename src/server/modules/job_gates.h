// What keeps pending jobs back beyond resources: a user's hold, a dependency, an
// array's throttle (`%N`), a singleton (api/job_relations.h). The JobGatesModule
// (modules/job_gates_module.h) keeps this state and gates such jobs in the core
// (ModuleStep::Gate) until they may run; the reason a gated job waits is its pending
// reason.
//
// Invariants: `watched` holds every unfinished job that has a hold, a dependency, a
// singleton or belongs to a throttled array (found lazily finished and dropped);
// `reasons` holds exactly the watched jobs gated now; `referenced` counts, per job,
// the watched jobs whose dependencies name it, and `outcomes` keeps the outcome of
// referenced jobs that left memory (archived).
// Thread safety: none; the module runs under the controller's core lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/job_relations.h"
#include "server/job_number.h"

namespace tessera {

// The reason stored in a held job's row (JobRow::reason), which keeps a hold durable.
inline constexpr std::string_view kHeldReasonPrefix = "held";
std::string HeldReason();
bool IsHeldReason(std::string_view reason);

struct JobGates {
  struct Array {
    std::vector<int64_t> indices;  // ascending: element k has id first + k
    int32_t throttle = 0;
  };

  std::set<JobNumber> watched;
  std::map<JobNumber, std::string> reasons;
  // A watched job's dependency with the jobs it names resolved (arrays to elements).
  struct Item {
    DependencyKind kind = DependencyKind::kAfterOk;
    std::vector<JobNumber> jobs;
  };
  struct Waits {
    std::vector<Item> items;
    bool any = false;
    bool singleton = false;
    std::string text;  // as submitted, for reasons
  };
  std::map<JobNumber, Waits> dependencies;  // of watched jobs that have one
  // Arrays by their id (the first element's), for elements and dependencies.
  std::map<uint64_t, std::shared_ptr<const Array>> arrays;
  std::map<JobNumber, int> referenced;
  std::map<JobNumber, DependencyTarget> outcomes;
  bool dirty = true;  // something changed since the last pass
};

}  // namespace tessera
