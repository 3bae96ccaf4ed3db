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
  FillJobReason(job, jobs_, *core_.lifecycle(), *catalog_,
                [&]() REQUIRES(mu_) { return GateReason(job); }, view);
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
  PublishFitVerdicts(std::make_shared<WaitContext>(core_.WaitContextOf(jobs_, clock_->NowMicros())),
                     *views_.context());
}

void Controller::PublishFitVerdicts(std::shared_ptr<WaitContext> c, const WaitContext& last) {
  if (SetFitVerdicts(nodes_, *catalog_, last, *c)) {
    gpu_task_defaults_.SetNodes(nodes_);  // the per-GPU room: once per node change
  }
  fit_stale_ = false;
  views_.SetContext(std::move(c));
}

void Controller::RefreshFitVerdicts() {
  if (!fit_stale_) {
    return;
  }
  const std::shared_ptr<const WaitContext> last = views_.context();
  auto c = std::make_shared<WaitContext>(*last);
  if (c->built) {
    c->nodes_up = NodesUp(nodes_);  // a node that just registered counts at once
  }
  PublishFitVerdicts(std::move(c), *last);
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
