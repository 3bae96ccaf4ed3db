// What the controller shows: jobs, nodes and who holds each GPU, queues, usage; and
// the queue configuration.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "base/time_format.h"
#include "server/controller.h"
#include "server/controller_rows.h"
#include "server/job_attempts.h"
#include "server/known_nodes.h"
#include "server/pending_reasons.h"
#include "server/modules/usage_report.h"

namespace tessera {

using namespace controller_rows;  // NOLINT: the controller's own helpers

// ---- views -------------------------------------------------------------------

nlohmann::json Controller::JobJson(const LiveJob& job, bool with_spec, bool with_reason) const {
  const JobRow& row = job.row;
  JobRecord archived;  // an archived job holds nothing and predicts nothing
  if (job.slot == JobTable::kArchived) {
    archived.gpu_milli = job.submission.spec.TotalGpuMilli(*catalog_);
  }
  const JobRecord& rec = job.slot == JobTable::kArchived ? archived : jobs_.Rec(job);
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < job.submission.spec.tasks.size(); ++t) {
    nlohmann::json task = {{"index", t}, {"node", nullptr}, {"gpus", nlohmann::json::array()},
                           {"state", "pending"}, {"exit_code", nullptr}};
    if (t < job.tasks.size()) {
      const TaskRun& run = job.tasks[t];
      task["node"] = run.node;
      const TaskOutcome outcome =
          t < rec.attempt.tasks.size() ? rec.attempt.tasks[t] : TaskOutcome{};
      task["state"] = outcome.exited ? "exited" : "running";
      if (outcome.exited) {
        task["exit_code"] = outcome.exit_code;
      }
      auto node = nodes_.all().find(run.node);
      if (t < rec.allocations.size() && node != nodes_.all().end()) {
        const NodeInventory& inv = node->second.inventory;
        for (const GpuGrant& g : rec.allocations[t].gpus) {
          const size_t gi = static_cast<size_t>(g.gpu);
          nlohmann::json gpu = {{"index", g.gpu}, {"milli", g.milli.value()}, {"mig_profile", nullptr}};
          if (gi < inv.spec.gpus.size()) {
            const GpuModel& model = catalog_->Get(inv.spec.gpus[gi].model);
            gpu["model"] = model.name;
            if (g.is_mig()) {
              gpu["mig_profile"] = model.mig_profiles[static_cast<size_t>(g.mig_profile)].name;
            }
          }
          if (gi < inv.gpu_uuids.size()) {
            gpu["uuid"] = inv.gpu_uuids[gi];
          }
          task["gpus"].push_back(std::move(gpu));
        }
      }
    }
    tasks.push_back(std::move(task));
  }
  const bool ended = Terminal(jobs_.StateOf(job));
  // Ended attempts (job_attempts.h): a finished job shows where its last one ran.
  const nlohmann::json stored = StoredAttempts(row.placement_json);
  if (ended && !stored.empty()) {
    const nlohmann::json& last = stored.back().value("tasks", nlohmann::json::array());
    for (size_t t = 0; t < tasks.size() && t < last.size(); ++t) {
      if (tasks[t]["gpus"].empty()) {
        tasks[t]["node"] = last[t].value("node", "");
        tasks[t]["gpus"] = last[t].value("gpus", nlohmann::json::array());
        tasks[t]["state"] = "exited";
        tasks[t]["exit_code"] = last[t].value("exit_code", 0);
      }
    }
  }
  const bool holding = jobs_.StateOf(job) == JobState::kRunning || jobs_.StateOf(job) == JobState::kStopping;
  nlohmann::json out = {
      {"id", row.id},
      {"name", row.name},
      {"tenant", row.tenant},
      {"user", job.submission.spec.user},
      {"queue", row.queue},
      {"state", std::string(JobStateName(jobs_.StateOf(job)))},
      {"priority", job.submission.spec.priority},
      {"submit_time", TimeOrNull(row.submit_us)},
      {"start_time", TimeOrNull(row.start_us)},
      {"end_time", TimeOrNull(row.end_us)},
      {"attempts", row.attempts},
      // The current attempt's start (run time counts from it), the ended attempts and
      // their run time together.
      {"attempt_start_time", holding ? TimeOrNull(rec.run_start) : nlohmann::json(nullptr)},
      {"attempt_history", AttemptsView(stored)},
      {"ended_attempts_run_seconds", StoredRunSeconds(stored)},
      {"preemptions", row.preemptions},
      // Saved progress the next attempt resumes from (its checkpoint), in seconds.
      {"progress_seconds", static_cast<double>(row.progress_us) / 1e6},
      // The runtime backfill and ordering expect (learned from finished jobs); null: none.
      {"predicted_seconds", rec.predicted_runtime > 0
                                ? nlohmann::json(static_cast<double>(rec.predicted_runtime) / 1e6)
                                : nlohmann::json(nullptr)},
      {"exit_code", ended && jobs_.StateOf(job) != JobState::kCancelled ? nlohmann::json(row.exit_code)
                                                               : nlohmann::json(nullptr)},
      {"gpus", job.submission.spec.TotalGpus()},
      {"gpu_milli", rec.gpu_milli},
      {"replicas", job.submission.spec.tasks.size()},
      {"checkpoint_dir", CheckpointDir(job)},
      {"run_as", RunAsJson(identities_.Known(row.tenant))},
      {"tasks", std::move(tasks)}};
  ModulesDescribeJob(job, out);
  RestartJson(job, out);
  out["held"] = jobs_.StateOf(job) == JobState::kPending && IsHeldReason(row.reason);
  if (with_reason) {
    JobView view;
    FillReason(job, view);
    out["reason"] = views_.ReasonOf(view);
  }
  if (with_spec) {
    // Parsed for this answer only: a parsed tree kept per job cost more than the rest of
    // a pending job (reads of the API are served from the published text instead).
    nlohmann::json parsed = nlohmann::json::parse(row.spec_json.str(), nullptr, false);
    out["spec"] = parsed.is_discarded() ? nlohmann::json(nullptr) : std::move(parsed);
  }
  return out;
}

void Controller::FillReason(const LiveJob& job, JobView& view) const {
  view.pending = jobs_.StateOf(job) == JobState::kPending;
  view.reason = job.row.reason;
  if (view.pending && job.slot != JobTable::kArchived) {
    if (std::string gate = GateReason(job); !gate.empty()) {
      view.gated = true;
      view.reason = std::move(gate);
      return;
    }
  }
  if (view.pending) {
    // Why it was requeued, if it was, then (at read time) why it waits now.
    const bool requeued = view.reason.rfind("requeued", 0) == 0 ||
                          view.reason.rfind("preempted", 0) == 0 ||
                          view.reason.rfind("restarting", 0) == 0;
    if (!requeued) {
      view.reason.clear();
    }
    if (job.slot != JobTable::kArchived) {
      view.restart_at = core_.lifecycle()->HeldUntil(jobs_.Rec(job).id);  // its backoff
    }
    // The core's copy of the spec: its shares carry the tenant's identity (MPS rule).
    view.demand = DemandOf(job.id(), job.row.queue,
                           job.slot != JobTable::kArchived ? jobs_.Rec(job).spec
                                                           : job.submission.spec,
                           *catalog_);
  }
}

void Controller::PublishView(const LiveJob& job) {
  if (!job.durable || job.slot == JobTable::kArchived) {
    return;
  }
  auto view = std::make_shared<JobView>();
  view->id = job.id();
  view->tasks = static_cast<int>(job.submission.spec.tasks.size());
  view->tenant = job.row.tenant;
  view->queue = job.row.queue;
  view->state = std::string(JobStateName(jobs_.StateOf(job)));
  view->user = job.submission.spec.user;
  FillReason(job, *view);
  // The spec never changes: the view shares the stored text (spliced in at read time)
  // rather than a parsed tree or a copy.
  if (job.spec_text_ok < 0) {
    job.spec_text_ok = nlohmann::json::accept(job.row.spec_json.str()) ? 1 : 0;
  }
  std::string body = JobJson(job, /*with_spec=*/false, /*with_reason=*/false)
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  body.pop_back();  // the closing brace
  body.shrink_to_fit();
  view->body = std::move(body);
  if (job.spec_text_ok == 1) {
    view->spec = job.row.spec_json;
  }
  views_.Put(std::move(view));
}

void Controller::PublishWaitContext() {
  core_.ApplyNodeChanges();  // the node set it publishes
  auto c = std::make_shared<WaitContext>();
  c->built = core_.state() != nullptr && core_.quota() != nullptr && core_.scheduler() != nullptr &&
             !core_.rebuild_pending();
  if (c->built) {
    c->nodes_up = core_.state()->present_count();
    if (core_.reservation() && core_.reservation()->job.valid() &&
        core_.reservation()->job.value() < jobs_.slot_count()) {
      c->reserved_job = jobs_.IdAt(core_.reservation()->job);
      c->reserved_start = core_.reservation()->start;
    }
    c->tree = core_.shared_tree();
    c->quota = std::make_shared<const QuotaLedger>(*core_.quota());
    c->charge = core_.scheduler()->charge_index();
    // The live copy only matters while jobs wait.
    if (core_.scheduler()->pending() > 0) {
      c->live = std::make_shared<const LiveCache>(*core_.state());
    }
    c->borrowing = core_.scheduler()->options().borrowing;
    c->reclaim = core_.scheduler()->options().preempt_reclaim;
    c->min_run_before_reclaim = core_.scheduler()->options().min_run_before_reclaim;
    const Micros now = clock_->NowMicros();
    const std::vector<JobRecord>& records = *jobs_.records();
    for (const JobRecord& rec : records) {
      if (rec.phase == JobPhase::kRunning && rec.queue.valid() &&
          core_.quota()->IsBorrowing(rec.queue)) {
        c->borrowers.push_back({core_.tree().spec(rec.queue).name, jobs_.IdAt(rec.id),
                                rec.run_start, rec.spec.preemptible});
      }
      if (rec.WaitsForPreemptor(records, now)) {
        c->held_victims[jobs_.IdAt(rec.id)] = {jobs_.IdAt(rec.evicted_for), rec.evicted_hold_until};
      }
    }
  }
  SetFitVerdicts(*c, *views_.context());
  views_.SetContext(std::move(c));
}

void Controller::SetFitVerdicts(WaitContext& c, const WaitContext& last) {
  // From the node registry, not the core: they hold while the nodes and their drains
  // do, and do not wait for a cycle to see a node come or go.
  c.fit = NodeSetFit(nodes_, *catalog_, NodeSet::kKnown, last.fit);
  c.fit_up = NodeSetFit(nodes_, *catalog_, NodeSet::kUp, last.fit_up);
  c.fit_undrained = NodeSetFit(nodes_, *catalog_, NodeSet::kKnownUndrained, last.fit_undrained);
  // The per-GPU room changes only with the nodes' specs, which that set's fingerprint
  // covers: a walk of every node once per node change, not once per cycle.
  if (c.fit_undrained == nullptr || c.fit_undrained != last.fit_undrained) {
    gpu_task_defaults_.SetNodes(nodes_);
  }
  c.down = DownNodes(nodes_);
  fit_stale_ = false;
}

void Controller::RefreshFitVerdicts() {
  if (!fit_stale_) {
    return;
  }
  const std::shared_ptr<const WaitContext> last = views_.context();
  auto c = std::make_shared<WaitContext>(*last);
  SetFitVerdicts(*c, *last);
  if (c->built) {
    c->nodes_up = 0;
    for (const auto& [name, node] : nodes_.all()) {
      c->nodes_up += node.up ? 1 : 0;
    }
  }
  views_.SetContext(std::move(c));
}

nlohmann::json Controller::Nodes() {
  MutexLock lock(mu_);
  return {{"nodes", NodesJson("")}};
}

std::map<std::pair<std::string, int>, std::vector<Controller::GrantHolder>> Controller::GpuHolders()
    const {
  std::map<std::pair<std::string, int>, std::vector<GrantHolder>> holders;
  for (const auto& [id, job] : jobs_.all()) {
    const JobRecord& rec = jobs_.Rec(job);
    if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
      continue;
    }
    for (size_t t = 0; t < rec.allocations.size() && t < job.tasks.size(); ++t) {
      if (jobs_.TaskExited(job, t)) {
        continue;
      }
      for (const GpuGrant& g : rec.allocations[t].gpus) {
        holders[{job.tasks[t].node, g.gpu}].push_back(GrantHolder{id, &job, &g});
      }
    }
  }
  return holders;
}

nlohmann::json Controller::NodesJson(const std::string& only, const Principal* viewer) const {
  const auto holders = GpuHolders();
  std::map<std::string, std::pair<int64_t, int64_t>> used;  // cpu, memory
  for (const auto& [id, job] : jobs_.all()) {
    const JobRecord& rec = jobs_.Rec(job);
    if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
      continue;
    }
    for (size_t t = 0; t < rec.allocations.size() && t < job.tasks.size(); ++t) {
      if (jobs_.TaskExited(job, t) || (!only.empty() && job.tasks[t].node != only)) {
        continue;
      }
      const Allocation& a = rec.allocations[t];
      auto& u = used[job.tasks[t].node];
      u.first += a.cpu.value();
      u.second += a.memory.value();
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, node] : nodes_.all()) {
    if (!only.empty() && name != only) {
      continue;
    }
    const NodeSpec& spec = node.inventory.spec;
    nlohmann::json gpus = nlohmann::json::array();
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      const GpuModel& model = catalog_->Get(spec.gpus[g].model);
      const GpuTelemetry* sample = g < node.telemetry.size() ? &node.telemetry[g] : nullptr;
      int64_t milli = 0;
      nlohmann::json hs = nlohmann::json::array();
      auto h = holders.find({name, static_cast<int>(g)});
      if (h != holders.end()) {
        for (const GrantHolder& x : h->second) {
          const GpuGrant& grant = *x.grant;
          milli += grant.milli.value();
          nlohmann::json profile = nullptr;
          std::string mig_uuid;
          if (grant.is_mig()) {
            profile = model.mig_profiles[static_cast<size_t>(grant.mig_profile)].name;
            for (size_t i = 0; sample != nullptr && i < sample->mig.size(); ++i) {
              if (sample->mig[i].start == grant.mig_start) {
                mig_uuid = sample->mig[i].uuid;
              }
            }
          }
          // Another tenant's job: who holds the GPU (for capacity planning), not what.
          const bool hidden = viewer != nullptr && viewer->role != Role::kAdmin &&
                              !(viewer->role == Role::kTenant && viewer->tenant == x.info->row.tenant);
          hs.push_back({{"job", hidden ? nlohmann::json(nullptr) : nlohmann::json(x.job.value())},
                        {"job_name", hidden ? "(another tenant's job)" : x.info->row.name},
                        {"tenant", x.info->row.tenant},
                        {"queue", x.info->row.queue},
                        {"milli", grant.milli.value()},
                        {"memory_mib", grant.memory.value()},
                        {"mig_profile", std::move(profile)},
                        {"mig_start", grant.is_mig() ? nlohmann::json(grant.mig_start)
                                                     : nlohmann::json(nullptr)},
                        {"mig_uuid", mig_uuid}});
        }
      }
      auto drain = node.gpu_drains.find(static_cast<int>(g));
      const bool drained = drain != node.gpu_drains.end();
      const bool lost = (sample != nullptr && sample->lost) ||
                        (drained && drain->second.kind == HealthKindName(HealthKind::kLost));
      nlohmann::json telemetry = nullptr;
      if (sample != nullptr && node.up) {
        nlohmann::json mig = nlohmann::json::array();
        for (const MigTelemetry& m : sample->mig) {
          mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start},
                         {"gi_id", m.gi_id}, {"fb_used_mib", m.fb_used_mib},
                         {"fb_free_mib", m.fb_free_mib}});
        }
        telemetry = {{"util_pct", sample->util_pct},
                     {"fb_used_mib", sample->fb_used_mib},
                     {"fb_free_mib", sample->fb_free_mib},
                     {"temp_c", sample->temp_c},
                     {"power_w", static_cast<double>(sample->power_mw) / 1000.0},
                     {"sm_clock_mhz", sample->sm_clock_mhz},
                     {"last_xid", sample->last_xid},
                     {"xid_count", sample->xid_count},
                     {"ecc_sbe_volatile", sample->ecc_sbe_volatile},
                     {"ecc_dbe_volatile", sample->ecc_dbe_volatile},
                     {"lost", sample->lost},
                     {"at", TimeOrNull(node.telemetry_at)},
                     {"mig", std::move(mig)}};
      }
      gpus.push_back({{"index", g},
                      {"uuid", g < node.inventory.gpu_uuids.size() ? node.inventory.gpu_uuids[g] : ""},
                      {"model", model.name},
                      {"memory_mib", model.memory.value()},
                      {"mode", SharingModeName(spec.gpus[g].mode)},
                      {"replicas", spec.gpus[g].replicas},  // timeslice only; else 0
                      {"used_milli", milli},
                      {"health", lost ? "lost" : drained ? "drained" : "ok"},
                      {"drain", drained ? DrainJson(drain->second) : DrainJson(std::nullopt)},
                      {"holders", std::move(hs)},
                      {"telemetry", std::move(telemetry)}});
    }
    auto u = used.find(name);
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [k, v] : spec.labels) {
      labels[k] = v;
    }
    out.push_back({{"name", name},
                   {"labels", std::move(labels)},
                   {"state", node.up ? "up" : "down"},
                   {"reason", node.reason.empty() ? ModulesNodeHold(name) : node.reason},
                   {"schedulable",
                    node.up && !node.drain.has_value() && ModulesNodeHold(name).empty()},
                   {"drain", DrainJson(node.drain)},
                   {"address", node.address},
                   {"last_heartbeat", TimeOrNull(node.last_seen)},
                   {"cpu_milli", spec.cpu.value()},
                   {"cpu_used_milli", u != used.end() ? u->second.first : 0},
                   {"memory_mib", spec.memory.value()},
                   {"memory_used_mib", u != used.end() ? u->second.second : 0},
                   {"gpus", std::move(gpus)}});
  }
  return out;
}

nlohmann::json Controller::Queues() {
  MutexLock lock(mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // pending, running
  for (const auto& [id, job] : jobs_.all()) {
    if (!job.durable) {
      continue;
    }
    const JobPhase phase = jobs_.Rec(job).phase;
    if (phase == JobPhase::kPending) {
      ++counts[job.row.queue].first;
    } else if (phase != JobPhase::kFinished) {
      ++counts[job.row.queue].second;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < core_.tree().size(); ++i) {
    const QueueId q(i);
    const QueueNodeSpec& spec = core_.tree().spec(q);
    nlohmann::json resources = nlohmann::json::array();
    for (size_t r = 0; r < core_.tree().resources().size(); ++r) {
      const Quota& quota = core_.tree().quota(q, r);
      auto opt = [](const std::optional<int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
      };
      resources.push_back({{"resource", ResourceNameString(core_.tree().resources()[r], *catalog_)},
                           {"nominal", quota.nominal},
                           {"borrowing_limit", opt(quota.borrowing_limit)},
                           {"lending_limit", opt(quota.lending_limit)},
                           {"used", core_.quota() != nullptr && !core_.rebuild_pending()
                                        ? core_.quota()->Usage(q, r)
                                        : 0}});
    }
    const QueueId parent = core_.tree().parent(q);
    auto c = counts.find(spec.name);
    out.push_back({{"name", spec.name},
                   {"kind", core_.tree().is_queue(q) ? "queue" : "cohort"},
                   {"parent", parent.valid() ? nlohmann::json(core_.tree().spec(parent).name)
                                             : nlohmann::json(nullptr)},
                   {"tenant", core_.tree().is_queue(q) ? nlohmann::json(core_.tree().tenant(q))
                                                       : nlohmann::json(nullptr)},
                   {"weight", spec.weight},
                   {"fair_share", FairShareJson(q)},
                   {"pending", c != counts.end() ? c->second.first : 0},
                   {"running", c != counts.end() ? c->second.second : 0},
                   {"max_pending", core_.tree().is_queue(q) ? nlohmann::json(MaxPendingOf(spec.name))
                                                            : nlohmann::json(nullptr)},
                   {"resources", std::move(resources)}});
    nlohmann::json& queue = out.back();
    if (core_.tree().is_queue(q)) {
      for (ControllerModule* m : modules_) {
        m->DescribeQueue(spec.name, core_.queues_yaml(), queue);
      }
    } else {
      queue["idle"] = nullptr;
    }
  }
  return {{"queues", std::move(out)}};
}

std::vector<std::string> Controller::Tenants() {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (QueueId q : core_.tree().queues()) {
    const std::string& t = core_.tree().tenant(q);
    if (std::find(out.begin(), out.end(), t) == out.end()) {
      out.push_back(t);
    }
  }
  return out;
}

Status Controller::SetQueues(const std::string& yaml) {
  MutexLock lock(mu_);
  CoreSession::Queues old = core_.TakeQueues();
  Status s = core_.ApplyQueueYaml(yaml);
  if (s.ok()) {
    for (const auto& [id, job] : jobs_.all()) {
      if (job.durable && jobs_.Rec(job).phase != JobPhase::kFinished &&
          !core_.tree().FindQueue(job.row.queue).ok()) {
        s = FailedPreconditionError("queue '" + job.row.queue + "' has unfinished jobs (job " +
                                    ToString(id) + ")");
        break;
      }
    }
  }
  if (s.ok()) {
    WriteBatch b;
    b.kv.emplace_back(kQueuesKey, yaml);
    s = store_->Commit(std::move(b));
  }
  if (!s.ok()) {
    core_.RestoreQueues(std::move(old));
    return s;
  }
  // Everything that pointed into the old tree is rebuilt against the new one.
  core_.DropScheduler(clock_->NowMicros());
  PublishWaitContext();  // reasons say so until the next cycle
  return Status::Ok();
}

StatusOr<nlohmann::json> Controller::Usage(Micros since, Micros until, const std::string& by,
                                           const std::string& tenant) {
  TESSERA_RETURN_IF_ERROR(CheckUsageQuery(since, until, by));
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  {  // the store is read above, without mu_
    MutexLock lock(mu_);
    Accounting::RunningIntervals(*LockedStep(clock_->NowMicros(), nullptr), since, until, rows);
  }
  return SumUsage(rows, since, until, by, tenant);
}

}  // namespace tessera
