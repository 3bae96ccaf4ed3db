#include "server/modules/validation_runs.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <utility>

#include "api/units.h"
#include "base/time_format.h"
#include "server/node_registry.h"

namespace tessera {
namespace {

constexpr const char* kCheckPrefix = "validations/check/";
constexpr const char* kSlotPrefix = "validations/slot/";
constexpr const char* kRunsPrefix = "validations/runs/";

std::string SlotKey(const std::string& check, const std::string& node) {
  return kSlotPrefix + check + "/" + node;
}

nlohmann::json SlotJson(const std::string& check, const std::string& node,
                        const ValidationSlot& s) {
  return {{"check", check},
          {"node", node},
          {"last_start_us", s.last_start},
          {"waiting_since_us", s.waiting_since},
          {"job", s.job},
          {"manual", s.manual},
          {"timed_out", s.timed_out}};
}

void WriteSlot(const std::string& check, const std::string& node, const ValidationSlot& s,
               ModuleStep& step) {
  step.Put(SlotKey(check, node), SlotJson(check, node, s).dump());
}

// A check job as the pass sees it, after what the pass did to it.
struct CheckJob {
  JobState state = JobState::kCancelled;
  JobPhase phase = JobPhase::kFinished;  // kFinished too for one read back from the store
  Micros run_start = 0;
  std::string node;  // task 0's; "" without tasks
};

std::optional<CheckJob> LookAt(const ModuleStep& step, JobNumber id) {
  std::optional<CheckJob> seen;
  step.VisitJob(id, [&](const JobFacts& job) {
    seen = CheckJob{job.state, JobPhase::kFinished, 0, job.tasks > 0 ? job.task_node(0) : ""};
    if (job.record != nullptr) {
      seen->phase = job.record->phase;
      seen->run_start = job.record->run_start;
    }
  });
  return seen;
}

}  // namespace

Status ValidationRuns::Load(Store& store) {
  TESSERA_ASSIGN_OR_RETURN(auto checks, store.ListKv(kCheckPrefix));
  for (const auto& [key, text] : checks) {
    if (text.empty()) {
      continue;  // removed
    }
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    StatusOr<ValidationCheck> c = ValidationCheckFromJson(j);
    if (!c.ok()) {
      return InternalError("stored validation check '" + key + "': " + c.status().message());
    }
    const std::string name = c.value().name;
    book_.checks[name] = std::move(c).value();
  }
  TESSERA_ASSIGN_OR_RETURN(auto slots, store.ListKv(kSlotPrefix));
  for (const auto& [key, text] : slots) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.value("check", nlohmann::json()).is_string() ||
        !j.value("node", nlohmann::json()).is_string()) {
      continue;  // "" once its check was removed
    }
    const std::string check = j["check"].get<std::string>();
    if (book_.checks.count(check) == 0) {
      continue;
    }
    ValidationSlot s;
    s.last_start = j.value("last_start_us", int64_t{0});
    s.waiting_since = j.value("waiting_since_us", int64_t{0});
    s.job = j.value("job", uint64_t{0});
    s.manual = j.value("manual", false);
    s.timed_out = j.value("timed_out", false);
    book_.slots[{check, j["node"].get<std::string>()}] = s;
  }
  TESSERA_ASSIGN_OR_RETURN(auto runs, store.ListKv(kRunsPrefix));
  for (const auto& [key, text] : runs) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
      return InternalError("stored validation runs '" + key + "' are not a JSON array");
    }
    for (const nlohmann::json& r : j) {  // oldest first
      StatusOr<ValidationRun> run = ValidationRunFromJson(r);
      if (!run.ok()) {
        return InternalError("stored validation run '" + key + "': " + run.status().message());
      }
      book_.Record(std::move(run).value());
    }
  }
  return Status::Ok();
}

void ValidationRuns::RecordRun(ValidationRun run, ModuleStep& step) {
  const std::pair<std::string, std::string> id{run.check, run.node};
  book_.Record(std::move(run));
  nlohmann::json kept = nlohmann::json::array();
  for (const ValidationRun& r : book_.runs[id]) {
    kept.push_back(ValidationRunToJson(r));
  }
  step.Put(kRunsPrefix + id.first + "/" + id.second, kept.dump());
}

StatusOr<nlohmann::json> ValidationRuns::Add(ModuleStep& step, ValidationCheck check) {
  if (book_.checks.count(check.name) > 0) {
    return AlreadyExistsError("validation check '" + check.name +
                              "' exists; remove it first to change it");
  }
  if (!check.queue.empty() && !step.HasQueue(check.queue)) {
    return InvalidArgumentError("queue: no queue '" + check.queue + "'");
  }
  check.created = step.now();
  nlohmann::json shown = ValidationCheckToJson(check);
  step.Put(kCheckPrefix + check.name, shown.dump());
  book_.checks[check.name] = std::move(check);
  return shown;
}

StatusOr<nlohmann::json> ValidationRuns::Remove(ModuleStep& step, const std::string& name) {
  auto it = book_.checks.find(name);
  if (it == book_.checks.end()) {
    return NotFoundError("no validation check '" + name + "'");
  }
  step.Put(kCheckPrefix + name, "");
  for (auto s = book_.slots.lower_bound({name, ""});
       s != book_.slots.end() && s->first.first == name;) {
    const std::string node = s->first.second;
    if (s->second.job != 0) {
      // Running, it stops now; requeued (pending), it ends at once: a check job must not
      // run later untracked.
      const std::string why = "cancelled: validation check " + name + " was removed";
      step.Stop(JobNumber(s->second.job),
                StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, 0, ""}, why);
      step.CancelPending(JobNumber(s->second.job), why);
    }
    step.Put(SlotKey(name, node), "");
    s = book_.slots.erase(s);
    step.NodeHoldChanged(node);
  }
  // Its results go too: a check added again under the name starts a fresh baseline.
  for (auto r = book_.runs.lower_bound({name, ""});
       r != book_.runs.end() && r->first.first == name;) {
    step.Put(kRunsPrefix + name + "/" + r->first.second, "[]");
    r = book_.runs.erase(r);
  }
  book_.checks.erase(it);
  return nlohmann::json{{"removed", name}};
}

nlohmann::json ValidationRuns::List(const ModuleStep& step) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, check] : book_.checks) {
    nlohmann::json j = ValidationCheckToJson(check);
    nlohmann::json nodes = nlohmann::json::array();
    step.ForEachNode(
        [&, &name = name, &check = check](const std::string& node_name, const NodeInfo& node) {
          if (!ValidationSelects(check.nodes, node_name, node.inventory.spec.labels)) {
            return;
          }
          ValidationSlot slot;
          if (auto s = book_.slots.find({name, node_name}); s != book_.slots.end()) {
            slot = s->second;
          }
          std::string state = "scheduled";
          if (slot.job != 0) {
            state = "running";
          } else if (slot.waiting_since > 0) {
            state = "waiting";
          } else if (slot.manual) {
            state = "due";
          }
          nlohmann::json n = {
              {"node", node_name},
              {"state", state},
              {"next_due", FormatRfc3339(ValidationDueAt(check, slot.last_start))},
              {"last_start", slot.last_start > 0 ? nlohmann::json(FormatRfc3339(slot.last_start))
                                                 : nlohmann::json()},
              {"job", slot.job != 0 ? nlohmann::json(slot.job) : nlohmann::json()}};
          if (auto r = book_.runs.find({name, node_name});
              r != book_.runs.end() && !r->second.empty()) {
            n["last_outcome"] = r->second.back().outcome;
          }
          nodes.push_back(std::move(n));
        });
    j["node_states"] = std::move(nodes);
    list.push_back(std::move(j));
  }
  return {{"checks", list}};
}

StatusOr<nlohmann::json> ValidationRuns::Run(ModuleStep& step, const std::string& name,
                                             const std::string& node) {
  auto it = book_.checks.find(name);
  if (it == book_.checks.end()) {
    return NotFoundError("no validation check '" + name + "'");
  }
  if (!node.empty() && step.Node(node) == nullptr) {
    return NotFoundError("no node '" + node + "'");
  }
  nlohmann::json queued = nlohmann::json::array();
  step.ForEachNode([&](const std::string& node_name, const NodeInfo& info) {
    if ((!node.empty() && node_name != node) ||
        (node.empty() &&
         !ValidationSelects(it->second.nodes, node_name, info.inventory.spec.labels))) {
      return;
    }
    ValidationSlot& slot = book_.slots[{name, node_name}];
    if (slot.job == 0 && slot.waiting_since == 0) {
      slot.manual = true;
      WriteSlot(name, node_name, slot, step);
    }
    queued.push_back(node_name);
  });
  book_.poked = true;
  return nlohmann::json{{"check", name}, {"nodes", queued}};
}

StatusOr<nlohmann::json> ValidationRuns::Results(const std::string& name, const std::string& node,
                                                 size_t limit) const {
  if (!name.empty() && book_.checks.count(name) == 0) {
    return NotFoundError("no validation check '" + name + "'");
  }
  std::vector<const ValidationRun*> all;
  for (const auto& [key, runs] : book_.runs) {
    if ((!name.empty() && key.first != name) || (!node.empty() && key.second != node)) {
      continue;
    }
    for (const ValidationRun& r : runs) {
      all.push_back(&r);
    }
  }
  std::sort(all.begin(), all.end(), [](const ValidationRun* a, const ValidationRun* b) {
    return a->time != b->time ? a->time > b->time : a->node < b->node;
  });
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < all.size() && i < limit; ++i) {
    nlohmann::json j = ValidationRunToJson(*all[i]);
    j["time"] = FormatRfc3339(all[i]->time);
    list.push_back(std::move(j));
  }
  return nlohmann::json{{"runs", list}};
}

Status ValidationRuns::StartCheck(ModuleStep& step, const ValidationCheck& check,
                                  const std::string& node, ValidationSlot& slot) {
  NodeJob job;
  job.name = "validate-" + check.name;
  job.tenant = kValidationTenant;
  job.queue = check.queue;
  job.command = check.command;
  job.env = {{"TESSERA_VALIDATION", check.name}, {"TESSERA_VALIDATION_NODE", node}};
  job.runtime_limit = check.timeout;
  TESSERA_ASSIGN_OR_RETURN(const JobNumber id, step.StartNodeJob(node, job));
  slot.job = id.value();
  slot.waiting_since = 0;
  slot.last_start = step.now();
  slot.manual = false;
  slot.timed_out = false;
  std::cerr << "tessera server: validation " << check.name << " starts on node " << node
            << " as job " << id.value() << "\n";
  return Status::Ok();
}

void ValidationRuns::HoldDueNodes(ModuleStep& step) {
  const Micros now = step.now();
  // Due nodes are held, at most `parallel` per check (a manual run is not limited).
  for (const auto& [name, check] : book_.checks) {
    int selected = 0;
    step.ForEachNode([&, &check = check](const std::string& node_name, const NodeInfo& info) {
      selected += ValidationSelects(check.nodes, node_name, info.inventory.spec.labels) ? 1 : 0;
    });
    const int limit = check.parallel > 0 ? check.parallel : std::max(1, selected / 10);
    int held = book_.HeldFor(name);
    step.ForEachNode(
        [&, &name = name, &check = check](const std::string& node_name, const NodeInfo& info) {
          if (!info.up || !ValidationSelects(check.nodes, node_name, info.inventory.spec.labels)) {
            return;
          }
          auto found = book_.slots.find({name, node_name});
          ValidationSlot probe;
          const ValidationSlot& current = found != book_.slots.end() ? found->second : probe;
          if (current.job != 0 || current.waiting_since > 0 ||
              (!current.manual &&
               (now < ValidationDueAt(check, current.last_start) || held >= limit)) ||
              book_.Holds(node_name)) {
            return;
          }
          ValidationSlot& slot = book_.slots[{name, node_name}];
          slot.waiting_since = now;
          ++held;
          WriteSlot(name, node_name, slot, step);
          step.NodeHoldChanged(node_name);
        });
  }
}

void ValidationRuns::TendJob(ModuleStep& step, const ValidationCheck& check,
                             const std::string& node, ValidationSlot& slot,
                             std::vector<Ended>& ended) {
  const std::string& name = check.name;
  const JobNumber id(slot.job);
  std::optional<CheckJob> job = LookAt(step, id);
  if (!job) {
    ended.push_back(
        {name, node, slot.job, JobState::kCancelled, 0, "the check job is no longer known", ""});
    return;
  }
  if (job->phase == JobPhase::kPending) {
    // Requeued (its node was lost): a check belongs to its node, so it ends here.
    step.CancelPending(id);
    job = LookAt(step, id);
  }
  if (job->phase == JobPhase::kRunning && !job->node.empty() && job->node != node) {
    // Requeued and placed elsewhere by a cycle before this pass: not a check of its node.
    step.Stop(id, StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, 0, ""},
              "cancelled: the validation check lost node " + node);
    job = LookAt(step, id);
  }
  if (Terminal(job->state)) {
    const RowOutcome outcome = step.Outcome(id);
    ended.push_back({name, node, slot.job, job->state, outcome.exit_code, outcome.reason, ""});
  } else if (job->phase == JobPhase::kRunning && step.now() - job->run_start > check.timeout) {
    slot.timed_out = true;
    step.Stop(id, StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted, 0, ""},
              "validation " + name + ": timed out after " + FormatDuration(check.timeout));
    WriteSlot(name, node, slot, step);
  }
}

bool ValidationRuns::StartOrRelease(ModuleStep& step, const ValidationCheck& check,
                                    const std::string& node, ValidationSlot& slot) {
  const Micros now = step.now();
  const NodeInfo* info = step.Node(node);
  std::string skipped;
  if (info != nullptr && info->up && step.NodeIdle(node)) {
    const Status started = StartCheck(step, check, node, slot);
    if (started.ok()) {
      return true;
    }
    skipped = "validation " + check.name + ": could not reserve the node: " + started.message();
  } else if (now - slot.waiting_since > check.max_wait) {
    skipped = "validation " + check.name + ": the node stayed busy for " +
              FormatDuration(check.max_wait) + "; skipped until the next slot";
  } else {
    return false;
  }
  RecordRun(ValidationRun{check.name, node, 0, now, "skipped", 0, skipped, {}}, step);
  slot.waiting_since = 0;
  slot.last_start = now;
  return true;
}

std::optional<std::vector<ValidationRuns::Ended>> ValidationRuns::Tend(ModuleStep& step) {
  const Micros now = step.now();
  if (book_.checks.empty() || !step.CoreReady() || (now < book_.next_step && !book_.poked)) {
    return std::nullopt;
  }
  book_.next_step = now + kPassInterval;
  book_.poked = false;
  HoldDueNodes(step);
  std::vector<Ended> ended;
  // Running checks: ended, requeued, moved or timed out; held nodes: start or let go.
  for (auto& [key, slot] : book_.slots) {
    const auto& [name, node] = key;
    const ValidationCheck& check = book_.checks.at(name);
    if (slot.job != 0) {
      TendJob(step, check, node, slot, ended);
    } else if (slot.waiting_since != 0 && StartOrRelease(step, check, node, slot)) {
      WriteSlot(name, node, slot, step);
      step.NodeHoldChanged(node);
    }
  }
  return ended;
}

void ValidationRuns::JudgeOne(ModuleStep& step, const Ended& e) {
  auto slot = book_.slots.find({e.check, e.node});
  auto check = book_.checks.find(e.check);
  if (slot == book_.slots.end() || check == book_.checks.end() || slot->second.job != e.job) {
    return;  // the check was removed meanwhile
  }
  const ValidationCheck& c = check->second;
  const Micros now = step.now();
  ValidationRun run{e.check, e.node, e.job, now, "passed", e.exit_code, "", {}};
  const NodeInfo* node = step.Node(e.node);
  if (e.state == JobState::kSucceeded) {
    for (const ValidationValue& v : ParseValidationOutput(e.output)) {
      ValidationVerdict verdict =
          JudgeValidationValue(v, book_.History(e.check, e.node, v.gpu, v.metric),
                               c.threshold_percent, c.higher_is_better);
      if (verdict.regressed) {
        run.outcome = "regressed";
        ++book_.regressions;
        const std::string reason = RegressionReason(e.check, verdict, c.threshold_percent);
        if (run.reason.empty()) {
          run.reason = reason;
        }
        if (node != nullptr) {
          // A GPU the node does not have (a check's mistake) drains the whole node.
          const bool known = v.gpu < static_cast<int>(node->inventory.spec.gpus.size());
          step.SetDrain(e.node, known ? v.gpu : -1,
                        DrainInfo{reason, "validation", "validation", now});
        }
      }
      run.results.push_back(std::move(verdict));
    }
  } else if (e.state == JobState::kFailed) {
    run.outcome = "failed";
    run.reason = slot->second.timed_out
                     ? "validation " + e.check + ": timed out after " + FormatDuration(c.timeout)
                     : "validation " + e.check + ": check failed with exit code " +
                           std::to_string(e.exit_code);
    if (node != nullptr) {
      step.SetDrain(e.node, -1, DrainInfo{run.reason, "validation", "validation", now});
    }
  } else {
    run.outcome = "interrupted";
    run.reason = "validation " + e.check + ": " + (e.reason.empty() ? "cancelled" : e.reason);
  }
  std::cerr << "tessera server: validation " << e.check << " on node " << e.node << ": "
            << run.outcome << (run.reason.empty() ? "" : " (" + run.reason + ")") << "\n";
  RecordRun(std::move(run), step);
  slot->second.job = 0;
  slot->second.timed_out = false;
  WriteSlot(e.check, e.node, slot->second, step);
  step.NodeHoldChanged(e.node);
}

void ValidationRuns::Judge(ModuleStep& step, const std::vector<Ended>& ended) {
  for (const Ended& e : ended) {
    JudgeOne(step, e);
  }
}

void ValidationRuns::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  (void)step;
  w.Family("tessera_validation_result", MetricType::kGauge,
           "The last result of each validation check per node, GPU and metric.");
  for (const auto& [key, runs] : book_.runs) {
    std::map<std::pair<int, std::string>, double> last;
    for (const ValidationRun& run : runs) {
      for (const ValidationVerdict& v : run.results) {
        last[{v.value.gpu, v.value.metric}] = v.value.value;
      }
    }
    for (const auto& [gm, value] : last) {
      w.Sample({{"node", key.second},
                {"gpu", std::to_string(gm.first)},
                {"check", key.first},
                {"metric", gm.second}},
               value);
    }
  }
  w.Family("tessera_validation_regressions_total", MetricType::kCounter,
           "Validation results that regressed beyond their check's threshold.");
  w.Sample({}, static_cast<double>(book_.regressions));
}

}  // namespace tessera
