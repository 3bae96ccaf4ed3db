// Validation runs (validation.h): the admin's checks, run on each node they select with
// the node reserved for them, and the drains their results call for.
//
// A node's run: when it is due, the node is held (drained in the core: no new work
// lands there; what runs there is never preempted for a check) until its jobs end; then
// the controller starts the check job itself, pinned to the node with every CPU, all its
// memory and every GPU not in MIG mode, as tenant _validation, through the same job
// table, store rows, launches and views as any job (so `tessera jobs` shows it). A node
// still busy after the check's max_wait is let go and the run recorded as skipped; the
// next run is due `every` later. When the job ends its output (task 0's log) is read,
// its results judged against each GPU's baseline, and a regressing GPU (or the whole
// node, for a failed or timed-out check) drained with the reason.
//
// Stored under "validations/": check/<name> (the definition; "" once removed),
// slot/<name>/<node> (when the node last ran it, what holds it now) and
// runs/<name>/<node> (its last ValidationBook::kRunsKept runs with their results, one row:
// the store's history stays bounded; long-term history is for the metrics' scraper).
#include <algorithm>
#include <iostream>

#include "api/units.h"
#include "base/time_format.h"
#include "server/controller.h"

namespace tessera {
namespace {

constexpr const char* kCheckPrefix = "validations/check/";
constexpr const char* kSlotPrefix = "validations/slot/";
constexpr const char* kRunsPrefix = "validations/runs/";
constexpr Micros kStepInterval = 1'000'000;  // the periodic pass, at most this often
constexpr int64_t kOutputBytes = 1 << 20;    // of a check's output read for results

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

// Keeps `run` and writes its node's kept runs (the last kRunsKept) as one row, so that
// the store holds a bounded history per check and node.
void RecordRun(ValidationBook& book, ValidationRun run, WriteBatch& batch) {
  const std::pair<std::string, std::string> id{run.check, run.node};
  book.Record(std::move(run));
  nlohmann::json kept = nlohmann::json::array();
  for (const ValidationRun& r : book.runs[id]) {
    kept.push_back(ValidationRunToJson(r));
  }
  batch.kv.emplace_back(kRunsPrefix + id.first + "/" + id.second, kept.dump());
}

bool NodeIdle(const NodeLedger& n) {
  return n.used_cpu().value() == 0 && n.used_memory().value() == 0 && !n.HasGpuAllocations();
}

}  // namespace

Status Controller::LoadValidations() {
  TESSERA_ASSIGN_OR_RETURN(auto checks, store_->ListKv(kCheckPrefix));
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
    validation_.checks[name] = std::move(c).value();
  }
  TESSERA_ASSIGN_OR_RETURN(auto slots, store_->ListKv(kSlotPrefix));
  for (const auto& [key, text] : slots) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.value("check", nlohmann::json()).is_string() ||
        !j.value("node", nlohmann::json()).is_string()) {
      continue;  // "" once its check was removed
    }
    const std::string check = j["check"].get<std::string>();
    if (validation_.checks.count(check) == 0) {
      continue;
    }
    ValidationSlot s;
    s.last_start = j.value("last_start_us", int64_t{0});
    s.waiting_since = j.value("waiting_since_us", int64_t{0});
    s.job = j.value("job", uint64_t{0});
    s.manual = j.value("manual", false);
    s.timed_out = j.value("timed_out", false);
    validation_.slots[{check, j["node"].get<std::string>()}] = s;
  }
  TESSERA_ASSIGN_OR_RETURN(auto runs, store_->ListKv(kRunsPrefix));
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
      validation_.Record(std::move(run).value());
    }
  }
  return Status::Ok();
}

void Controller::ApplyValidationHold(const std::string& name) {
  NodeInfo* node = nodes_.Find(name);
  if (node != nullptr && node->up && !core_.rebuild_pending()) {
    ApplyDrains(*node);
  }
  fit_stale_ = true;
}

StatusOr<nlohmann::json> Controller::AddValidation(const nlohmann::json& body) {
  TESSERA_ASSIGN_OR_RETURN(ValidationCheck check, ValidationCheckFromJson(body));
  Pending out;
  {
    MutexLock lock(mu_);
    if (validation_.checks.count(check.name) > 0) {
      return AlreadyExistsError("validation check '" + check.name +
                                "' exists; remove it first to change it");
    }
    if (!check.queue.empty() && !core_.tree().FindQueue(check.queue).ok()) {
      return InvalidArgumentError("queue: no queue '" + check.queue + "'");
    }
    check.created = clock_->NowMicros();
    out.batch.kv.emplace_back(kCheckPrefix + check.name, ValidationCheckToJson(check).dump());
    validation_.checks[check.name] = check;
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return ValidationCheckToJson(check);
}

StatusOr<nlohmann::json> Controller::RemoveValidation(const std::string& name) {
  Pending out;
  {
    MutexLock lock(mu_);
    auto it = validation_.checks.find(name);
    if (it == validation_.checks.end()) {
      return NotFoundError("no validation check '" + name + "'");
    }
    const Micros now = clock_->NowMicros();
    out.batch.kv.emplace_back(kCheckPrefix + name, "");
    for (auto s = validation_.slots.lower_bound({name, ""});
         s != validation_.slots.end() && s->first.first == name;) {
      const std::string node = s->first.second;
      if (s->second.job != 0) {
        if (LiveJob* job = jobs_.Find(JobNumber(s->second.job)); job && !Terminal(jobs_.StateOf(*job))) {
          job->row.reason = "cancelled: validation check " + name + " was removed";
          StopJob(*job, StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, 0, ""}, now, out);
        }
      }
      out.batch.kv.emplace_back(SlotKey(name, node), "");
      s = validation_.slots.erase(s);
      ApplyValidationHold(node);
    }
    // Its results go too: a check added again under the name starts a fresh baseline.
    for (auto r = validation_.runs.lower_bound({name, ""});
         r != validation_.runs.end() && r->first.first == name;) {
      out.batch.kv.emplace_back(kRunsPrefix + name + "/" + r->first.second, "[]");
      r = validation_.runs.erase(r);
    }
    validation_.checks.erase(it);
    Seal(out);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return nlohmann::json{{"removed", name}};
}

nlohmann::json Controller::Validations() {
  MutexLock lock(mu_);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, check] : validation_.checks) {
    nlohmann::json j = ValidationCheckToJson(check);
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& [node_name, node] : nodes_.all()) {
      if (!ValidationSelects(check.nodes, node_name, node.inventory.spec.labels)) {
        continue;
      }
      ValidationSlot slot;
      if (auto s = validation_.slots.find({name, node_name}); s != validation_.slots.end()) {
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
          {"last_start",
           slot.last_start > 0 ? nlohmann::json(FormatRfc3339(slot.last_start)) : nlohmann::json()},
          {"job", slot.job != 0 ? nlohmann::json(slot.job) : nlohmann::json()}};
      if (auto r = validation_.runs.find({name, node_name});
          r != validation_.runs.end() && !r->second.empty()) {
        n["last_outcome"] = r->second.back().outcome;
      }
      nodes.push_back(std::move(n));
    }
    j["node_states"] = std::move(nodes);
    list.push_back(std::move(j));
  }
  return {{"checks", list}};
}

StatusOr<nlohmann::json> Controller::RunValidation(const std::string& name,
                                                   const std::string& node) {
  Pending out;
  nlohmann::json queued = nlohmann::json::array();
  {
    MutexLock lock(mu_);
    auto it = validation_.checks.find(name);
    if (it == validation_.checks.end()) {
      return NotFoundError("no validation check '" + name + "'");
    }
    if (!node.empty() && nodes_.Find(node) == nullptr) {
      return NotFoundError("no node '" + node + "'");
    }
    for (const auto& [node_name, info] : nodes_.all()) {
      if ((!node.empty() && node_name != node) ||
          (node.empty() &&
           !ValidationSelects(it->second.nodes, node_name, info.inventory.spec.labels))) {
        continue;
      }
      ValidationSlot& slot = validation_.slots[{name, node_name}];
      if (slot.job == 0 && slot.waiting_since == 0) {
        slot.manual = true;
        out.batch.kv.emplace_back(SlotKey(name, node_name), SlotJson(name, node_name, slot).dump());
      }
      queued.push_back(node_name);
    }
    validation_.poked = true;
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return nlohmann::json{{"check", name}, {"nodes", queued}};
}

StatusOr<nlohmann::json> Controller::ValidationResults(const std::string& name,
                                                       const std::string& node, size_t limit) {
  MutexLock lock(mu_);
  if (!name.empty() && validation_.checks.count(name) == 0) {
    return NotFoundError("no validation check '" + name + "'");
  }
  std::vector<const ValidationRun*> all;
  for (const auto& [key, runs] : validation_.runs) {
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

Status Controller::StartValidationJob(const ValidationCheck& check, const std::string& node_name,
                                      ValidationSlot& slot, Micros now, Pending& out) {
  StatusOr<NodeId> node_id = core_.state()->FindNode(node_name);
  if (!node_id.ok()) {
    return node_id.status();
  }
  const NodeSpec& spec = core_.state()->spec(node_id.value());
  const NodeLedger& ledger = core_.state()->node(node_id.value());
  Allocation a{node_id.value(), spec.cpu, spec.memory, {}};
  for (int g = 0; g < ledger.gpu_count(); ++g) {
    if (ledger.gpus()[static_cast<size_t>(g)].mode() != SharingMode::kMig) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
  }
  // Checked on the live ledger first, so that a refusal changes nothing.
  TESSERA_RETURN_IF_ERROR(core_.state()->Allocate(a));
  TESSERA_RETURN_IF_ERROR(core_.state()->Release(a));

  std::string queue = check.queue;
  if (queue.empty() || !core_.tree().FindQueue(queue).ok()) {
    queue = core_.tree().spec(core_.tree().queues().front()).name;
  }
  JobSubmission sub;
  sub.spec.name = "validate-" + check.name;
  sub.spec.queue = queue;
  sub.spec.user = kValidationTenant;
  sub.spec.preemptible = false;
  sub.spec.runtime_limit = check.timeout;
  sub.spec.submit_time = now;
  TaskRequest t;
  t.cpu = spec.cpu;
  t.memory = spec.memory;
  t.gpu_count = static_cast<int>(a.gpus.size());
  t.gpu_milli = t.gpu_count > 0 ? kWholeGpu : MilliGpu(0);
  t.topology = GpuTopology::kAny;
  sub.spec.tasks.push_back(t);
  sub.command = {"/bin/sh", "-c", check.command};
  sub.env = {{"TESSERA_VALIDATION", check.name}, {"TESSERA_VALIDATION_NODE", node_name}};
  sub.hold_if_unfit = true;

  const JobNumber id = jobs_.TakeId();
  LiveJob& job = jobs_.Add(id);
  job.row.id = id.value();
  job.row.tenant = kValidationTenant;
  job.row.queue = queue;
  job.row.name = sub.spec.name;
  job.row.spec_json = JobSubmissionToJson(sub, *catalog_).dump();
  job.row.submit_us = now;
  job.submission = std::move(sub);
  job.durable = true;
  ++counters_.submitted[queue];
  JobRecord& rec = jobs_.Rec(job);
  rec.spec = job.submission.spec;
  rec.attempt.policy = job.submission.restart.value_or(DefaultRestartPolicy());
  rec.queue = core_.tree().FindQueue(queue).value();
  rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
  rec.allocations = {a};
  rec.held = {1};
  rec.phase = JobPhase::kRunning;
  rec.run_start = now;
  rec.eligible_since = now;
  rec.starts = 1;
  // Held and charged as a running job is after a restart, without the cycle's placer.
  Status held = core_.lifecycle()->Restore(rec);
  if (!held.ok()) {
    return held;  // not reached: Allocate succeeded above under the same lock
  }
  StartJob(job, StartDecision{}, now, out);
  slot.job = id.value();
  slot.waiting_since = 0;
  slot.last_start = now;
  slot.manual = false;
  slot.timed_out = false;
  std::cerr << "tessera server: validation " << check.name << " starts on node " << node_name
            << " as job " << id.value() << "\n";
  return Status::Ok();
}

void Controller::HoldDueValidationNodes(Micros now, Pending& out) {
  // Due nodes are held, at most `parallel` per check (a manual run is not limited).
  for (const auto& [name, check] : validation_.checks) {
    int selected = 0;
    for (const auto& [node_name, info] : nodes_.all()) {
      selected += ValidationSelects(check.nodes, node_name, info.inventory.spec.labels) ? 1 : 0;
    }
    const int limit = check.parallel > 0 ? check.parallel : std::max(1, selected / 10);
    int held = validation_.HeldFor(name);
    for (const auto& [node_name, info] : nodes_.all()) {
      if (!info.up || !ValidationSelects(check.nodes, node_name, info.inventory.spec.labels)) {
        continue;
      }
      auto found = validation_.slots.find({name, node_name});
      ValidationSlot probe;
      const ValidationSlot& current = found != validation_.slots.end() ? found->second : probe;
      if (current.job != 0 || current.waiting_since > 0 ||
          (!current.manual &&
           (now < ValidationDueAt(check, current.last_start) || held >= limit)) ||
          validation_.Holds(node_name)) {
        continue;
      }
      ValidationSlot& slot = validation_.slots[{name, node_name}];
      slot.waiting_since = now;
      ++held;
      out.batch.kv.emplace_back(SlotKey(name, node_name), SlotJson(name, node_name, slot).dump());
      ApplyValidationHold(node_name);
    }
  }
}

void Controller::TendValidationJob(const ValidationCheck& check, const std::string& node_name,
                                   ValidationSlot& slot, Micros now,
                                   std::vector<EndedValidation>& ended, Pending& out) {
  const std::string& name = check.name;
  LiveJob* job = jobs_.Find(JobNumber(slot.job));
  if (job == nullptr) {
    ended.push_back({name, node_name, slot.job, JobState::kCancelled, 0,
                     "the check job is no longer known", ""});
    return;
  }
  JobRecord& rec = jobs_.Rec(*job);
  if (rec.phase == JobPhase::kPending) {
    // Requeued (its node was lost): a check belongs to its node, so it ends here.
    core_.lifecycle()->Finish(rec, JobEnd::kCancelled, now);
    out.finished.push_back(job->id());
    job->row.end_us = now;
    out.dirty.insert(job->id());
  }
  if (rec.phase == JobPhase::kRunning && !job->tasks.empty() && job->tasks[0].node != node_name) {
    // Requeued and placed elsewhere by a cycle before this pass: not a check of its node.
    job->row.reason = "cancelled: the validation check lost node " + node_name;
    StopJob(*job, StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, 0, ""}, now, out);
  }
  if (Terminal(jobs_.StateOf(*job))) {
    ended.push_back(
        {name, node_name, slot.job, jobs_.StateOf(*job), job->row.exit_code, job->row.reason, ""});
  } else if (rec.phase == JobPhase::kRunning && now - rec.run_start > check.timeout) {
    slot.timed_out = true;
    job->row.reason = "validation " + name + ": timed out after " + FormatDuration(check.timeout);
    StopJob(*job, StopRequest{AttemptEnd::kFail, RequeueCause::kPreempted, 0, ""}, now, out);
    out.batch.kv.emplace_back(SlotKey(name, node_name), SlotJson(name, node_name, slot).dump());
  }
}

bool Controller::StartOrReleaseValidation(const ValidationCheck& check,
                                          const std::string& node_name, ValidationSlot& slot,
                                          Micros now, Pending& out) {
  const std::string& name = check.name;
  StatusOr<NodeId> id = core_.state()->FindNode(node_name);
  NodeInfo* info = nodes_.Find(node_name);
  if (id.ok() && info != nullptr && info->up && NodeIdle(core_.state()->node(id.value()))) {
    Status started = StartValidationJob(check, node_name, slot, now, out);
    if (!started.ok()) {
      ValidationRun run{name,
                        node_name,
                        0,
                        now,
                        "skipped",
                        0,
                        "validation " + name + ": could not reserve the node: " + started.message(),
                        {}};
      RecordRun(validation_, std::move(run), out.batch);
      slot.waiting_since = 0;
      slot.last_start = now;
    }
    return true;
  }
  if (now - slot.waiting_since > check.max_wait) {
    ValidationRun run{name,
                      node_name,
                      0,
                      now,
                      "skipped",
                      0,
                      "validation " + name + ": the node stayed busy for " +
                          FormatDuration(check.max_wait) + "; skipped until the next slot",
                      {}};
    RecordRun(validation_, std::move(run), out.batch);
    slot.waiting_since = 0;
    slot.last_start = now;
    return true;
  }
  return false;
}

void Controller::JudgeValidation(const EndedValidation& e, Micros now, Pending& judged) {
  auto slot = validation_.slots.find({e.check, e.node});
  auto check = validation_.checks.find(e.check);
  if (slot == validation_.slots.end() || check == validation_.checks.end() ||
      slot->second.job != e.job) {
    return;  // the check was removed meanwhile
  }
  const ValidationCheck& c = check->second;
  ValidationRun run{e.check, e.node, e.job, now, "passed", e.exit_code, "", {}};
  NodeInfo* node = nodes_.Find(e.node);
  if (e.state == JobState::kSucceeded) {
    for (const ValidationValue& v : ParseValidationOutput(e.output)) {
      ValidationVerdict verdict =
          JudgeValidationValue(v, validation_.History(e.check, e.node, v.gpu, v.metric),
                               c.threshold_percent, c.higher_is_better);
      if (verdict.regressed) {
        run.outcome = "regressed";
        ++validation_.regressions;
        const std::string reason = RegressionReason(e.check, verdict, c.threshold_percent);
        if (run.reason.empty()) {
          run.reason = reason;
        }
        if (node != nullptr) {
          const bool known = v.gpu < static_cast<int>(node->inventory.spec.gpus.size());
          SetDrain(*node, known ? v.gpu : -1, DrainInfo{reason, "validation", "validation", now},
                   judged);
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
      SetDrain(*node, -1, DrainInfo{run.reason, "validation", "validation", now}, judged);
    }
  } else {
    run.outcome = "interrupted";
    run.reason = "validation " + e.check + ": " + (e.reason.empty() ? "cancelled" : e.reason);
  }
  std::cerr << "tessera server: validation " << e.check << " on node " << e.node << ": "
            << run.outcome << (run.reason.empty() ? "" : " (" + run.reason + ")") << "\n";
  RecordRun(validation_, std::move(run), judged.batch);
  slot->second.job = 0;
  slot->second.timed_out = false;
  judged.batch.kv.emplace_back(SlotKey(e.check, e.node),
                               SlotJson(e.check, e.node, slot->second).dump());
  ApplyValidationHold(e.node);
}

void Controller::ValidationStep() {
  if (!validation_step_mu_.TryLock()) {
    return;  // another thread's pass is under way
  }
  ValidationPass();
  validation_step_mu_.Unlock();
}

void Controller::ValidationPass() {
  std::vector<EndedValidation> ended;
  Pending out;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    if (validation_.checks.empty() || core_.state() == nullptr || core_.rebuild_pending() ||
        (now < validation_.next_step && !validation_.poked)) {
      return;
    }
    validation_.next_step = now + kStepInterval;
    validation_.poked = false;
    HoldDueValidationNodes(now, out);
    // Running checks: ended, requeued, moved or timed out; held nodes: start or let go.
    for (auto& [key, slot] : validation_.slots) {
      const auto& [name, node_name] = key;
      const ValidationCheck& check = validation_.checks.at(name);
      if (slot.job != 0) {
        TendValidationJob(check, node_name, slot, now, ended, out);
      } else if (slot.waiting_since != 0 &&
                 StartOrReleaseValidation(check, node_name, slot, now, out)) {
        out.batch.kv.emplace_back(SlotKey(name, node_name), SlotJson(name, node_name, slot).dump());
        ApplyValidationHold(node_name);
      }
    }
    Seal(out);
  }
  if (Status s = Publish(std::move(out)); !s.ok()) {
    std::cerr << "tessera server: validation: " << s.message() << "\n";
    return;
  }
  if (ended.empty()) {
    return;
  }
  // Outside the core lock: task output has a lock of its own, never taken under it.
  for (EndedValidation& e : ended) {
    StatusOr<LogChunk> chunk = logs_.Read(JobNumber(e.job), 0, 0, kOutputBytes);
    if (chunk.ok()) {
      e.output = std::move(chunk.value().data);
    }
  }
  Pending judged;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    for (const EndedValidation& e : ended) {
      JudgeValidation(e, now, judged);
    }
    Seal(judged);
  }
  if (Status s = Publish(std::move(judged)); !s.ok()) {
    std::cerr << "tessera server: validation: " << s.message() << "\n";
  }
  Wake();  // the nodes let go take work again
}

void Controller::WriteValidationMetrics(MetricsWriter& w) const {
  w.Family("tessera_validation_result", MetricType::kGauge,
           "The last result of each validation check per node, GPU and metric.");
  for (const auto& [key, runs] : validation_.runs) {
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
  w.Sample({}, static_cast<double>(validation_.regressions));
}

}  // namespace tessera
