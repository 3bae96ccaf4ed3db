// What the controller shows of jobs, and what the nodes' views are written from (who
// holds each GPU; services/cluster_views.h writes them); and the queue configuration.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "base/time_format.h"
#include "server/controller.h"
#include "server/job_rows.h"
#include "server/job_attempts.h"
#include "server/known_nodes.h"
#include "server/pending_reasons.h"
#include "server/views/job_json.h"
#include "server/views/node_views.h"

namespace tessera {

using namespace job_rows;  // NOLINT: the controller's own helpers

// ---- views -------------------------------------------------------------------

nlohmann::json Controller::JobJson(const LiveJob& job, bool with_spec, bool with_reason) const {
  JobRecord archived;  // an archived job holds nothing and predicts nothing
  if (job.slot == JobTable::kArchived) {
    archived.gpu_milli = job.submission.spec.TotalGpuMilli(*catalog_);
  }
  const JobState state = jobs_.StateOf(job);
  nlohmann::json out = ::tessera::JobJson(JobJsonInputs{
      job, job.slot == JobTable::kArchived ? archived : jobs_.Rec(job), state, nodes_.all(),
      *catalog_, CheckpointDir(job), identities_.Known(job.row.tenant)});
  host_.DescribeJob(FactsOf(job), out);  // the restart block too (RestartsModule)
  out["held"] = state == JobState::kPending && IsHeldReason(job.row.reason);
  if (with_reason) {
    JobView view;
    FillReason(job, view);
    out["reason"] = views_.ReasonOf(view);
  }
  if (with_spec) {
    // Parsed for this answer only: a parsed tree kept per job cost more than the rest of
    // a pending job (reads of the API are served from the published text instead).
    nlohmann::json parsed = nlohmann::json::parse(job.row.spec_json.str(), nullptr, false);
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

void Controller::NodeInputs(const std::string& only,
                            const std::function<void(const NodeViewInputs&)>& visit) const {
  GpuHolds holds;
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
      for (const GpuGrant& g : a.gpus) {
        holds[{job.tasks[t].node, g.gpu}].push_back(GpuHold{id, &job.row, &g});
      }
      auto& u = used[job.tasks[t].node];
      u.first += a.cpu.value();
      u.second += a.memory.value();
    }
  }
  std::map<std::string, std::string> module_holds;
  for (const auto& [name, node] : nodes_.all()) {
    if (!only.empty() && name != only) {
      continue;
    }
    if (std::string why = host_.NodeHold(name); !why.empty()) {
      module_holds.emplace(name, std::move(why));
    }
  }
  visit(NodeViewInputs{nodes_.all(), holds, used, *catalog_, module_holds});
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

}  // namespace tessera
