// ValidationRuns: the admin's checks (modules/validation.h), run on each node they
// select with the node reserved for them, and the drains their results call for.
//
// A node's run: when it is due, the node is held (NodeHold: the core takes it out of
// placement; what runs there is never preempted for a check) until its jobs end; then
// the check job is started through the core (ModuleStep::StartNodeJob), pinned to the
// node with every CPU, all its memory and every GPU not in MIG mode, as tenant
// _validation, through the same job table, rows, launches and views as any job. A node
// still busy after the check's max_wait is let go and the run recorded as skipped; the
// next run is due `every` later. When the job ends its output (task 0's log) is judged
// against each GPU's baseline, and a regressing GPU (or the whole node, for a failed or
// timed-out check) drained with the reason.
//
// Owns: the checks, each (check, node) slot and each node's last runs (ValidationBook),
// stored under "validations/": check/<name> (the definition; "" once removed),
// slot/<name>/<node> (when the node last ran it, what holds it now) and
// runs/<name>/<node> (its last ValidationBook::kRunsKept runs, one row: the store's
// history stays bounded; long-term history is for the metrics' scraper).
// Hooks: Load (checks, slots and runs), NodeHold (a node held or running a check takes
// no new work), WriteMetrics. The API (Add, Remove, List, Run, Results) and the pass
// (Tend, then Judge) are called by its owner, services/validation_service.h, which
// attaches it to the controller (Controller::Attach).
// Invariants: at most `parallel` nodes are held for a check at once (a manual run is
// not limited), each only while up and not held for another check; a check job
// belongs to its node: one requeued or moved elsewhere is cancelled; every slot and run
// change is in the step's batch; a check's removal removes its slots and runs.
// Thread safety: none; it is called with the controller's core lock held (its hooks, and
// its owner's transactions). A check's output is read between Tend and Judge without
// that lock (task output has a lock of its own, never taken under it), so the pass is
// two locked steps.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/modules/controller_module.h"
#include "server/modules/validation.h"

namespace tessera {

class ValidationRuns final : public ControllerModule {
 public:
  static constexpr Micros kPassInterval = 1'000'000;  // the periodic pass, at most this often
  static constexpr int64_t kOutputBytes = 1 << 20;    // of a check's output read for results

  Status Load(Store& store) override;
  std::string NodeHold(const std::string& node) const override { return book_.HoldReason(node); }
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override;

  // The admin's API (ValidationService's Add and the rest). Add: AlreadyExists for
  // a name in use, InvalidArgument for an unknown queue. Run: every node the check
  // selects (or `node`) is due now. Results: newest first, at most `limit`; "" names all.
  StatusOr<nlohmann::json> Add(ModuleStep& step, ValidationCheck check);
  StatusOr<nlohmann::json> Remove(ModuleStep& step, const std::string& name);
  nlohmann::json List(const ModuleStep& step) const;
  StatusOr<nlohmann::json> Run(ModuleStep& step, const std::string& name, const std::string& node);
  StatusOr<nlohmann::json> Results(const std::string& name, const std::string& node,
                                   size_t limit) const;

  // A check job that ended; `output` (task 0's, at most kOutputBytes) is filled in by
  // the caller between Tend and Judge.
  struct Ended {
    std::string check, node;
    uint64_t job = 0;
    JobState state = JobState::kCancelled;
    int exit_code = 0;
    std::string reason;
    std::string output;
  };
  // The pass's first step: holds due nodes, tends running checks (ended, requeued,
  // moved, timed out) and starts or lets go held nodes. The checks that ended; none
  // when no pass is due (at most every kPassInterval unless a run was asked for, and
  // only while the core is ready).
  std::optional<std::vector<Ended>> Tend(ModuleStep& step);
  // The second: each ended check judged and recorded, its node drained for a regression
  // or a failure, and let go.
  void Judge(ModuleStep& step, const std::vector<Ended>& ended);

  const ValidationBook& book() const { return book_; }

 private:
  // Holds each check's due nodes, at most `parallel` at once.
  void HoldDueNodes(ModuleStep& step);
  // The running check job of `slot`: into `ended` once it ended; cancelled when it was
  // requeued or moved off `node`, failed when it timed out.
  void TendJob(ModuleStep& step, const ValidationCheck& check, const std::string& node,
               ValidationSlot& slot, std::vector<Ended>& ended);
  // A held node: its check started once it is idle, or it is let go (the run recorded as
  // skipped) after max_wait. False while it still waits, the slot unchanged.
  bool StartOrRelease(ModuleStep& step, const ValidationCheck& check, const std::string& node,
                      ValidationSlot& slot);
  Status StartCheck(ModuleStep& step, const ValidationCheck& check, const std::string& node,
                    ValidationSlot& slot);
  void JudgeOne(ModuleStep& step, const Ended& e);
  // Keeps `run` and writes its node's kept runs as one row.
  void RecordRun(ValidationRun run, ModuleStep& step);

  ValidationBook book_;
};

}  // namespace tessera
